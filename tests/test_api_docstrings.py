"""README.md, "Python API": "`help(ddtree_bayes)` lists the API; every function has a
docstring with an example". fit, load, predict and load_inputs had docstrings but no example
(the one example was the module's)."""
from __future__ import annotations

import inspect


def test_every_public_function_has_a_docstring_with_an_example():
    import ddtree_bayes as db

    functions = [n for n in db.__all__ if inspect.isfunction(getattr(db, n))]
    assert functions == ["fit", "load", "load_inputs", "predict"]
    missing = [n for n in functions
               if "Example::" not in (inspect.getdoc(getattr(db, n)) or "")]
    assert missing == []
    # each example calls its own function, as the README's snippet does
    for n in functions:
        example = inspect.getdoc(getattr(db, n)).split("Example::", 1)[1]
        assert f"db.{n}(" in example, n
