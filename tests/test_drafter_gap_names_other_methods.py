"""The warning that no drafter card serves a model's method names the methods its cards do
serve.

Walking README.md's "Adding your own data" (a card of my-model, its EAGLE-3 head with
`card add --target my-model`, a llama-bench AR run, `fit`), `predict --accept 10` asks the
bundled question's DDTree (the model measured only AR) and warned "no drafter card serves
my-model's ddtree and the fit measured none: there is no drafter to run it with
(`ddtree-bayes card add` one)": but the user had just added one, for EAGLE-3. The warning now
says which methods the model's cards serve, so the question to ask is in sight."""
from __future__ import annotations

from types import SimpleNamespace


def _card(name: str, target: str, methods: tuple[str, ...]):
    from ddtree_bayes.core.drafters import DrafterCard

    return DrafterCard(name, target, methods, "eagle3_head", 1, 0.4, 1.3, 2, "s")


def test_the_gap_names_the_methods_the_models_cards_serve():
    from ddtree_bayes.engine.scenario import no_drafter

    draws = SimpleNamespace(measurements=SimpleNamespace(rows=[]))
    cards = (_card("my-eagle3", "my-model", ("eagle3",)),
             _card("other-mtp", "other-model", ("mtp",)))
    assert no_drafter(draws, "my-model", "ddtree", cards) == (
        "no drafter card serves my-model's ddtree and the fit measured none: there is no "
        "drafter to run it with (`ddtree-bayes card add` one; my-model's drafter cards serve "
        "eagle3 (my-eagle3): ask --method eagle3)")
    # a card of another model is no help; a model with no card reads as before
    assert no_drafter(draws, "third-model", "ddtree", cards) == (
        "no drafter card serves third-model's ddtree and the fit measured none: there is no "
        "drafter to run it with (`ddtree-bayes card add` one)")
    # the method a card serves has no gap
    assert no_drafter(draws, "my-model", "eagle3", cards) is None


def test_two_methods_are_listed_in_order():
    from ddtree_bayes.engine.scenario import no_drafter

    draws = SimpleNamespace(measurements=SimpleNamespace(rows=[]))
    cards = (_card("m-mtp", "my-model", ("mtp",)), _card("m-e3", "my-model", ("eagle3",)))
    assert no_drafter(draws, "my-model", "ddtree", cards).endswith(
        "(`ddtree-bayes card add` one; my-model's drafter cards serve eagle3 (m-e3), mtp "
        "(m-mtp): ask --method eagle3 or mtp)")
