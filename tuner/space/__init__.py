"""The search-space language: which knobs a study searches, over which values, and what it scores.

A space is a YAML file (`search_spaces/*.yaml`, see _space.py for the schema): params (_param.py) and their
`when:` conditions (_condition.py), resource expressions in bounds (`high: cpus - 1`, _expr.py), the bundled
spaces and how a name or a path finds its file (_load.py), the domains a study stores when it starts
(_domains.py), and how many distinct configs a space holds (_count.py). It knows nothing of Ray or Optuna's
storage; tuner.search samples from it.
"""

from tuner.space._batch import heaviest_split, kept_split, own_effective_batch, split_learning_note
from tuner.space._domains import check_resumable_split, check_stored_domains, domains_of, stored_space, study_space
from tuner.space._load import (clamp_notes, knob_notes, list_spaces, load_space, parse_space, resolve_space_path,
                               space_names)
from tuner.space._condition import CONTEXT_NAMES, Condition
from tuner.space._count import config_count
from tuner.space._param import ParamSpec
from tuner.space._space import Space, check_finite, spaces_dir

__all__ = [
    "CONTEXT_NAMES",
    "Condition",
    "ParamSpec",
    "Space",
    "check_finite",
    "check_resumable_split",
    "check_stored_domains",
    "clamp_notes",
    "config_count",
    "domains_of",
    "heaviest_split",
    "kept_split",
    "knob_notes",
    "list_spaces",
    "load_space",
    "own_effective_batch",
    "parse_space",
    "resolve_space_path",
    "space_names",
    "spaces_dir",
    "split_learning_note",
    "stored_space",
    "study_space",
]
