"""Write to stderr and exit with status 3, as a broken bench script would."""

import sys

print("loading model failed: something broke", file=sys.stderr)
sys.exit(3)
