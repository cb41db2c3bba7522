#!/usr/bin/python3
# Red team 40: a stand-in for the host's stub resolver (systemd-resolved listens on
# 127.0.0.53:53): answers every datagram at once with a fixed reply. One thread, as resolved.
# Usage: resolver.py <addr> <port>
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
while True:
    data, peer = s.recvfrom(512)
    s.sendto(b"A " + data[:64], peer)
