from seqlake.cli import run

run()
