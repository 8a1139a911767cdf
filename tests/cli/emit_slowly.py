"""A Batch task for the ``logs --follow`` tests: numbered lines on stdout and stderr, over a few seconds.

``line <n>`` on stdout, ``err <n>`` on stderr every third line; every 10th stdout line is written in two
parts with a pause in between (a partial line in the file for a while).
"""

import sys
import time

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 200
PAUSE = float(sys.argv[2]) if len(sys.argv) > 2 else 0.02

for number in range(1, COUNT + 1):
    if number % 10 == 0:
        sys.stdout.write(f"line {number} ")
        sys.stdout.flush()
        time.sleep(PAUSE)
        sys.stdout.write("end\n")
    else:
        sys.stdout.write(f"line {number}\n")
    sys.stdout.flush()
    if number % 3 == 0:
        sys.stderr.write(f"err {number}\n")
        sys.stderr.flush()
    time.sleep(PAUSE)
