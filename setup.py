"""Build hook: the wheel carries ``kafkalog_spark_pyspark.pth`` at its root, so that pip puts
it in site-packages beside the package (what it does: ``kafkalog_spark/spark_daemon.py``).
Everything else is configured in ``pyproject.toml``. An editable install does not get it from
here; ``./dev`` copies it into its virtualenv."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "kafkalog_spark_pyspark.pth"


class BuildWithPth(build_py):
    """``build_py`` that also copies :data:`PTH` to the root of the build."""

    def run(self) -> None:
        super().run()
        self.copy_file(str(Path(__file__).resolve().parent / PTH), str(Path(self.build_lib) / PTH))


setup(cmdclass={"build_py": BuildWithPth})
