# Pin kernel memory in unread unix stream socket buffers (each pair written full, never read).
use strict; use Socket; use IO::Handle;
my ($procs, $pairs, $out) = @ARGV;
$procs ||= 1; $pairs ||= 2000;
for my $p (1..$procs) {
  my $pid = fork();
  if (!defined $pid) { last; }
  if ($pid == 0) {
    my @keep; my $total = 0; my $buf = "x" x 65536;
    for my $i (1..$pairs) {
      socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0) or last;
      setsockopt($a, SOL_SOCKET, SO_SNDBUF, 4*1024*1024);
      $a->blocking(0);
      while (1) { my $n = syswrite($a, $buf); last unless $n; $total += $n; }
      push @keep, $a, $b;
    }
    if ($out) { open(my $o, '>>', $out); print $o "$p $total\n"; close $o; }
    sleep 100000; exit 0;
  }
}
sleep 100000;
