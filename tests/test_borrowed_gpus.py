"""A fit of several models asked without --gpus on a GPU its model never ran: the count came
from another model's rows there (an 8B model asked on b300 was answered on b300 x8, kimi-k2.6's
deployment, without a word; `add` refuses another model's count). Said now; a count the
model's own rows give, and any count given, say nothing."""

import pytest

from ddtree_bayes.engine import scenario as P
from ddtree_bayes.engine.testing import multi_model_draws

pytestmark = pytest.mark.fast

ASK = {"engine": "vllm", "method": "ar", "block": None, "budget": None, "verify_tokens": None,
       "context_tokens": None}


def test_a_count_from_another_models_rows_is_said():
    d = multi_model_draws()
    sc = P.resolve_scenario(d, hardware="b300", gpus=None, model="llama-3.1-8b-instruct", **ASK)
    assert (sc.gpus, sc.gpus_from) == (8, ("kimi-k2.6 on b300",))
    assert P.borrowed_gpus_warning(sc) == (
        "--gpus not given: x8 is the GPU count of kimi-k2.6 on b300, another model's deployment "
        "(llama-3.1-8b-instruct has no rows on b300); give --gpus for yours")
    assert P.borrowed_gpus_warning(sc) in P.memory_warnings(d, sc)


@pytest.mark.parametrize("hardware,gpus,model,want", [
    ("h100", None, "llama-3.1-8b-instruct", 1),   # its own rows there
    ("h200", None, "llama-3.1-8b-instruct", 1),   # a GPU none ran: its own count elsewhere
    ("b300", 1, "llama-3.1-8b-instruct", 1),      # given
    ("b300", None, "kimi-k2.6", 8),               # its own rows there
])
def test_a_count_the_model_gives_or_the_user_gives_is_not(hardware, gpus, model, want):
    d = multi_model_draws()
    sc = P.resolve_scenario(d, hardware=hardware, gpus=gpus, model=model, **ASK)
    assert (sc.gpus, sc.gpus_from) == (want, ())
    assert P.borrowed_gpus_warning(sc) is None
