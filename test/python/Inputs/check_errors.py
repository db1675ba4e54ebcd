"""The bad-argument check the moe_mlir test scripts share."""


def expect_value_errors(kernel, cases):
    """Calls kernel(*args) for each (args, fragment) of `cases`; each must
    raise ValueError with `fragment` in its message. Prints a PASS or FAIL
    line per case; returns the number of failures."""
    failed = 0
    for args, fragment in cases:
        try:
            kernel(*args)
            print("FAIL: no error for %r" % fragment)
            failed += 1
        except ValueError as err:
            ok = fragment in str(err)
            failed += not ok
            print("%s: %s" % ("PASS" if ok else "FAIL", err))
    return failed
