"""A Batch task for the streaming tests: 2,000 numbered lines on stdout and stderr, over a few seconds.

Odd numbers go to stdout, even ones to stderr; every 100th line is written in two parts with a pause
in between (a partial line in the file for a while); line 777 holds a byte that is not UTF-8.
"""

import sys
import time

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 2000

for number in range(1, COUNT + 1):
    stream = sys.stdout if number % 2 else sys.stderr
    if number % 100 == 0:
        stream.write(f"line {number} part-a ")
        stream.flush()
        time.sleep(0.05)
        stream.write("part-b\n")
    elif number == 777:
        stream.flush()
        stream.buffer.write(b"line 777 bad byte \xff here\n")
    else:
        stream.write(f"line {number}\n")
    stream.flush()
    if number % 40 == 0:
        time.sleep(0.06)
