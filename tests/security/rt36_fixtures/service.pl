#!/usr/bin/perl
# A TCP service on the host (sshd, a web server, a model provider's endpoint): accepts, reads, closes on EOF.
use strict; use warnings; use Socket; use IO::Select;
my ($addr, $port) = @ARGV;
socket(my $s, PF_INET, SOCK_STREAM, 0) or die; setsockopt($s, SOL_SOCKET, SO_REUSEADDR, 1);
bind($s, pack_sockaddr_in($port, inet_aton($addr))) or die "bind: $!"; listen($s, 4096) or die;
my $sel = IO::Select->new($s);
while (1) { for my $fh ($sel->can_read(1)) {
  if ($fh == $s) { my $c; accept($c, $s) and $sel->add($c); next }
  my $n = sysread($fh, my $buf, 4096); if (!$n) { $sel->remove($fh); close $fh } } }
