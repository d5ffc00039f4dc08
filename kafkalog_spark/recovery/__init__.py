"""Recovery (engine layer): what a broker's load does to a crashed log dir — finish swaps, split
overflowed segments, cut at the first invalid entry, rebuild indexes, snapshots, leader epochs
and checkpoints — plus salvage, reconcile across replicas, and the Spark verify job.

May import: ``errors``, ``codec``, ``storage``, ``log``, ``inspect`` (it verifies what it
repairs) and the data source's task helpers. Imported by ``delta`` (a restore lets recovery
rebuild what it wrote), ``report``, ``cli`` and ``jobs``.
"""
