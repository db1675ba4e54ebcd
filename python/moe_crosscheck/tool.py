"""Running moe-ref from the cross-checks.

Kept apart from ``suites`` (which needs ml_dtypes) so that the torch commands
can use it on a machine without ml_dtypes.
"""

import subprocess


class ToolError(Exception):
    """moe-ref failed; the message holds its command line and stderr."""


def run_tool(moe_ref, *args):
    """Runs moe-ref with ``args`` and returns its stdout; raises ToolError
    when it fails."""
    command = [moe_ref] + [str(a) for a in args]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolError("%s exited %d: %s" % (" ".join(command),
                                              proc.returncode,
                                              proc.stderr.strip()))
    return proc.stdout
