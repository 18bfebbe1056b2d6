"""Exchange: federations that feed each other (DAQ → reconstruction → analysis).

``copy_dataset`` copies what a dataset of one federation committed since the
last exchange into another (plain copies or skims, provenance carried
over); ``follow`` keeps doing it as the source commits, woken by its change
feed (``open_feed``); ``follow_rules`` runs the replicator on every commit.
What a source says is checked before it is used (``giod.exchange.source``,
``giod.exchange.provenance``).
See docs/exchange.md.
"""

from giod.exchange.copy import ExchangeReport, copy_dataset, federation_name
from giod.exchange.feed import Feed, open_feed
from giod.exchange.follow import Backoff, follow, follow_rules
from giod.exchange.provenance import provenance_chain

__all__ = [
    "Backoff",
    "ExchangeReport",
    "Feed",
    "copy_dataset",
    "federation_name",
    "follow",
    "follow_rules",
    "open_feed",
    "provenance_chain",
]
