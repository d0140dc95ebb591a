"""The stack's ``RunParameters``: every run the start function starts carries them, they are part of
the run's id, and a parameter the pipeline does not know fails loudly."""

from __future__ import annotations

import pytest

from seqlake.aws.events import run_id
from seqlake.aws.start import StartSettings, run_parameters
from seqlake.base.model import ObjectRef
from seqlake.base.params import Params

ENV = {"STATE_MACHINE_ARN": "arn:aws:states:us-east-1:1:stateMachine:x", "GLUE_DATABASE": "db"}


def test_run_parameters_reach_the_settings_and_the_run_id() -> None:
    settings = StartSettings.from_env({**ENV, "RUN_PARAMETERS": '{"trim": false, "min_length": 50}'})
    assert dict(settings.parameters) == {"trim": False, "min_length": 50}
    assert Params.from_dict(dict(settings.parameters)).trim is False
    objects = [ObjectRef(f"s3://b/incoming/x_R{m}.fastq.gz", 10, f"e{m}") for m in (1, 2)]
    # the same files with other parameters are another run; with none set, the id is the files' alone
    assert run_id("x", objects, settings.parameters) != run_id("x", objects) == run_id("x", objects, {})
    assert StartSettings.from_env(ENV).parameters == {}


@pytest.mark.parametrize("text", ['{"trimm": false}', "[1]", '{"extra": {}}'])
def test_an_unknown_run_parameter_is_an_error(text: str) -> None:
    with pytest.raises(ValueError, match="RunParameters"):
        run_parameters(text)


def test_the_preset_is_a_run_parameter_of_known_values() -> None:
    """``preset`` chooses minimap2's long-read presets; it is part of the run id like the others, and a preset
    minimap2 does not have fails at the start, not in every child."""
    objects = [ObjectRef("s3://b/incoming/x.fastq.gz", 10, "e")]
    assert run_parameters('{"preset": "map-ont"}') == {"preset": "map-ont"}
    assert Params.from_dict({"preset": "map-ont"}).long_reads and not Params().long_reads
    assert run_id("x", objects, {"preset": "map-ont"}) != run_id("x", objects, {"preset": "map-hifi"})
    with pytest.raises(ValueError, match="preset 'map-nanopore'"):
        run_parameters('{"preset": "map-nanopore"}')


def test_ivars_thresholds_and_the_gff_are_set_on_the_command_line() -> None:
    """``process`` and ``local run`` take ivar's thresholds and --gff under their own names (base/params.py's
    VALUE_FLAGS), each setting its run parameter; the others keep their defaults."""
    from seqlake.base.params import Params, chosen_parameters
    from seqlake.cli import build_parser

    for command in (["process", "r1.fq", "--out", "out"], ["local", "run", "r1.fq"]):
        args = build_parser().parse_args([*command, "--min-depth", "20", "--min-fraction", "0.5",
                                          "--consensus-fraction", "0.6", "--consensus-min-depth", "5",
                                          "--min-base-quality", "30", "--report-fraction", "0.05",
                                          "--gff", "genes.gff3"])
        chosen = chosen_parameters(args)
        assert chosen == {"variant_min_depth": 20, "variant_freq": 0.5, "consensus_freq": 0.6,
                          "consensus_min_depth": 5, "min_base_quality": 30, "variant_report_freq": 0.05,
                          "gff": "genes.gff3"}
        Params.from_dict(chosen)
        assert chosen_parameters(build_parser().parse_args(command)) == {}
