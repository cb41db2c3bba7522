#!/usr/bin/python3
# Red team 39: a quiet sibling.
import time
time.sleep(3600)
