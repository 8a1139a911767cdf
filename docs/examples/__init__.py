"""Code the documentation includes (between ``# [START name]`` / ``# [END name]``); tests/docs imports each file."""
