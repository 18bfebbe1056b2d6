"""The nearline tier above the store: tier rules carried out (``policy``) and jobs' bulk staging (``staging``).

The library and its site are ``giod.storage.tape``; see ``docs/tiers.md``.
"""

from giod.tier.policy import TierReport, apply_tier_rules, is_nearline, move_to_nearline
from giod.tier.staging import StagePlan, StageProgress, nearline_holder, stage_databases

__all__ = ["StagePlan", "StageProgress", "TierReport", "apply_tier_rules", "is_nearline", "move_to_nearline",
           "nearline_holder", "stage_databases"]
