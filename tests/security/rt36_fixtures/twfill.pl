#!/usr/bin/perl
# Red team 36 (--net host, under the bind guard, the listen ban and dbbb1de's 1,024-socket cap):
# connect(2) then close(2), over and over, to ONE non-loopback destination (<host>:<port>).
# The agent never holds more than one socket per process, so the socket count (a create and a
# release program) never nears its cap. But the port a closed connection used stays taken for
# 60 s (TIME_WAIT, the active closer's side), after the socket's release: no hook runs, no
# count holds it. tcp_tw_reuse=2 lets a TIME_WAIT port be reused only towards loopback, so
# towards any other address ~470 connections/s keep all 28,232 ports of the range in TIME_WAIT
# with that destination: nobody on the host can open a connection to it (EADDRNOTAVAIL).
#
# A peer that speaks first (the broker's INFO) is read before the close: closing with unread
# data sends a reset, which leaves no TIME_WAIT.
#
# Usage: perl twfill.pl <out dir> <port> <procs> <seconds> <host> [read]
use strict; use warnings;
use Socket qw(PF_INET SOCK_STREAM inet_aton pack_sockaddr_in);
use IO::Handle; use Time::HiRes qw(time sleep);
my ($out, $port, $procs, $secs, $host, $read) = @ARGV;
$procs //= 2; $secs //= 1e9; $host //= '127.0.0.1';
open(my $L, '>>', "$out/twfill.log") or die "log: $!"; $L->autoflush(1);
sub say { printf $L "%.3f %s\n", time, shift }
say("started host=$host port=$port procs=$procs");
{
  socket(my $b, PF_INET, SOCK_STREAM, 0) or die;
  say(bind($b, pack_sockaddr_in(0, inet_aton('127.0.0.1'))) ? "bind allowed" : "bind refused: $!");
  close $b;
  socket(my $l, PF_INET, SOCK_STREAM, 0) or die;
  say(listen($l, 5) ? "listen allowed" : "listen refused: $!");
  close $l;
  # The socket cap is in force: hold sockets until refused, then let them all go.
  my @h; my $why = '';
  while (@h < 5000) { socket(my $s, PF_INET, SOCK_STREAM, 0) or do { $why = "$!"; last }; push @h, $s }
  say("socket cap: " . scalar(@h) . " sockets held at once, then: $why");
  close $_ for @h;
}
my $dest = pack_sockaddr_in($port, inet_aton($host));
for my $k (1 .. $procs) {
  my $pid = fork(); die "fork: $!" unless defined $pid; next if $pid;
  my ($ok, $bad, $t0, $last) = (0, 0, time, time); my %why;
  while (time - $t0 < $secs) {
    socket(my $fh, PF_INET, SOCK_STREAM, 0) or do { $why{"socket: $!"}++; $bad++; sleep 0.01; next };
    if (connect($fh, $dest)) { $ok++; sysread($fh, my $info, 65536) if $read; } else { $why{"connect: $!"}++; $bad++; }
    close $fh;
    if (time - $last > 5) {
      $last = time;
      say("child $k: ok=$ok bad=$bad " . join(",", map { "$_=$why{$_}" } sort keys %why));
    }
  }
  exit 0;
}
sleep 1e9;
