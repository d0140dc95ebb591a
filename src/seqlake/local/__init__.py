"""seqlake on the local cloud: the adapter (:mod:`.adapter`) that gives :mod:`localcloud` what is the
app's, and the ``seqlake local ...`` commands (:mod:`.commands` and the modules beside it)."""
