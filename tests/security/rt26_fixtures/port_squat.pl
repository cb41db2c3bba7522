#!/usr/bin/perl
# Red team 26 (--net host): waits for the broker's port to come free and listens on it, then
# greets whoever dials with a broker-like INFO and records what each sends (its CONNECT).
# Usage: port_squat.pl <port> <out dir>
use strict;
use Socket;
use IO::Handle;
my ($port, $out) = @ARGV;
my $srv;
while (1) {
  socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!";
  setsockopt($s, SOL_SOCKET, SO_REUSEADDR, pack("l", 1));
  if (bind($s, pack_sockaddr_in($port, inet_aton("127.0.0.1"))) && listen($s, 512)) {
    $srv = $s;
    last;
  }
  close $s;
  select(undef, undef, undef, 0.002);
}
open(my $st, '>', "$out/squatted") or die;
print $st time(), "\n";
close $st;
open(my $log, '>>', "$out/connects") or die;
$log->autoflush(1);
my $info = 'INFO {"server_id":"NFAKE","server_name":"fake","version":"2.10.0","proto":1,' .
  '"host":"127.0.0.1","port":' . $port . ',"headers":true,"auth_required":true,' .
  '"max_payload":1048576,"nonce":"squatted-nonce"}' . "\r\n";
$SIG{CHLD} = 'IGNORE';
while (accept(my $c, $srv)) {
  my $pid = fork();
  if (defined $pid && $pid == 0) {
    syswrite($c, $info);
    my $buf = '';
    my $rin = '';
    vec($rin, fileno($c), 1) = 1;
    if (select(my $r = $rin, undef, undef, 5)) { sysread($c, $buf, 8192); }
    $buf =~ s/[\r\n]+/ /g;
    print $log substr($buf, 0, 600), "\n";
    sleep 30;
    exit 0;
  }
  close $c;
}
