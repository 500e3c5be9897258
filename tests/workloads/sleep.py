"""Sleep for S seconds, with a child process that sleeps too (the whole tree must die on timeout)."""

import subprocess
import sys
import time

subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
time.sleep(float(sys.argv[2]))
