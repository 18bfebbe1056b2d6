"""The nearline tier above the store: tier rules carried out (``policy``) and jobs' bulk staging (``staging``),
where a dataset's files are (``status``).

The library and its site are ``giod.storage.tape``; see ``docs/tiers.md``.
"""

from giod.tier.policy import TierReport, apply_tier_rules, is_nearline, move_to_nearline
from giod.tier.staging import (
    StagePlan,
    StageProgress,
    has_nearline,
    may_stage,
    nearline_holder,
    stage_containers,
    stage_databases,
)
from giod.tier.status import TierCount, tier_counts, tier_summary

__all__ = ["StagePlan", "StageProgress", "TierCount", "TierReport", "apply_tier_rules", "has_nearline", "is_nearline",
           "may_stage", "move_to_nearline", "nearline_holder", "stage_containers", "stage_databases", "tier_counts",
           "tier_summary"]
