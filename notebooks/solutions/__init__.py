"""Reference solutions of the notebooks' "On your own" exercises (tests/test_exercises.py runs each check with them)."""
