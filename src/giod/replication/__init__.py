"""Replication: copies between sites that are verified, chosen well, and repaired.

This layer sits below the federation: its functions take a catalog and a
*site opener* (a function from a site name to a :class:`~giod.storage.site.Site`,
such as ``Federation.site``), so the CLI, the server and the federation's read
path all use them the same way::

    fed = giod.open("myfed")
    report = replicate(fed.catalog, fed.site, "qcd", "caltech", containers=["tag", "reco"], streams=8)

Modules: ``sites`` (registering and probing sites, tokens), ``transfer``
(checksums and one verified copy), ``copy`` (``replicate``: many copies in
parallel, resumable), ``reads`` (replica choice and failover for readers),
``verify`` (scrubbing), ``rules`` (rule states and the replicator).
See docs/replication.md.
"""

from giod.replication.copy import Transfer, TransferReport, plan_copies, replicate, run_transfers
from giod.replication.reads import ReadBalancer, mark_damaged, read_replica
from giod.replication.rules import PassReport, RuleState, replicator, replicator_pass, rule_state, rule_states
from giod.replication.sites import SiteHealth, normalize_site_url, probe, site_token
from giod.replication.transfer import copy_file, file_checksum, file_state, place
from giod.replication.verify import Finding, VerifyReport, verify

__all__ = [
    "Finding",
    "PassReport",
    "ReadBalancer",
    "RuleState",
    "SiteHealth",
    "Transfer",
    "TransferReport",
    "VerifyReport",
    "copy_file",
    "file_checksum",
    "file_state",
    "mark_damaged",
    "normalize_site_url",
    "place",
    "plan_copies",
    "probe",
    "read_replica",
    "replicate",
    "replicator",
    "replicator_pass",
    "rule_state",
    "rule_states",
    "run_transfers",
    "site_token",
    "verify",
]
