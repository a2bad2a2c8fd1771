"""The package's version: the project's (CMakeLists.txt `project(VERSION)`);
tests/install/install_test.sh fails when the two differ."""

__version__: str = "0.1.0"
