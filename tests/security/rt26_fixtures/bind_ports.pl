#!/usr/bin/perl
# Red team 26 (--net host): binds every port of the host's ephemeral range on 0.0.0.0 and holds
# them, from a few processes (RLIMIT_NOFILE is per process). A bound port is skipped by the
# kernel's choice of a source port for connect(), so once they are all held no process of the
# network namespace can open an outgoing TCP connection (EADDRNOTAVAIL).
use strict;
use Socket;
my ($out) = @ARGV;
open(my $rf, '<', '/proc/sys/net/ipv4/ip_local_port_range') or die "range: $!";
my ($lo, $hi) = split(/\s+/, scalar <$rf>);
close $rf;
my $per = 3500;
my @kids;
for (my $s = $lo; $s <= $hi; $s += $per) {
  my $e = $s + $per - 1;
  $e = $hi if $e > $hi;
  my $pid = fork();
  die "fork: $!" unless defined $pid;
  if ($pid == 0) {
    my @held;
    my $n = 0;
    for my $p ($s .. $e) {
      socket(my $fh, PF_INET, SOCK_STREAM, 0) or last;
      if (bind($fh, pack_sockaddr_in($p, INADDR_ANY)) && listen($fh, 1)) { push @held, $fh; $n++; }
      else { close $fh; }
    }
    open(my $o, '>', "$out.$s") or die;
    print $o "$n\n";
    close $o;
    sleep 100000;
    exit 0;
  }
  push @kids, $pid;
}
open(my $o, '>', "$out.range") or die;
print $o "$lo $hi\n";
close $o;
waitpid($_, 0) for @kids;
