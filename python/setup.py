"""Copies the built libMoeJIT.so and libmoe_cuda_runtime.so into the
package (moe_mlir/lib), so that an installed moe_mlir needs no path set.

The libraries come from $MOE_MLIR_BUILD_DIR/lib, by default the build/
folder of this checkout (scripts/build.sh). Without them the package still
installs; moe_mlir then looks for the library named by $MOE_MLIR_LIBRARY.
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARIES = ("libMoeJIT.so", "libmoe_cuda_runtime.so")


class BuildWithLibraries(build_py):
    def run(self):
        super().run()
        build = os.environ.get("MOE_MLIR_BUILD_DIR",
                               os.path.join(HERE, os.pardir, "build"))
        target = os.path.join(self.build_lib, "moe_mlir", "lib")
        for name in LIBRARIES:
            source = os.path.join(build, "lib", name)
            if os.path.exists(source):
                os.makedirs(target, exist_ok=True)
                shutil.copy2(source, os.path.join(target, name))


setup(cmdclass={"build_py": BuildWithLibraries})
