/**
 * Red team 19b, attack X (controls): alpha's supervisor uid, with its groups, goes straight at
 * what beta's supervisor, the signer and root keep: beta's store dir, agents' dir, socket dir and
 * a unix socket in it, a log beta wrote, the signer records, the audit trail, the `$SYS` creds,
 * delivery's cred, and hard links to any of them (to read later, or for tmpfiles to chown).
 */
import assert from "node:assert/strict";
import { fakeHost, why } from "./_redteam19b_root.ts";

Deno.test({
  name:
    `redteam19b X1 - alpha's supervisor reaches nothing of beta's, the signer's or root's${why}`,
  ignore: why !== "",
  async fn() {
    const h = await fakeHost();
    try {
      const A = h.spaceDir("alpha");
      const B = h.spaceDir("beta");
      const bHex = B.slice("secrets/space.".length);
      const bSock = `run/sockets/${h.instance("beta").slice(0, 12)}`;
      // Beta's supervisor: an agent cred, an agent dir, a listening socket, a log, its lock.
      const beta = h.sup("beta");
      const prep = await h.sh(
        beta,
        `umask 077 && mkdir -p ${B}/agents && echo BETA-AGENT > ${B}/agents/b1.creds && mkdir agents/space.${bHex}/b1 && echo W > agents/space.${bHex}/b1/f && echo LOG > logs/beta.log && : > run/manager.${
          h.instance("beta")
        }.lock && (python3 -c "import socket,time; s=socket.socket(socket.AF_UNIX); s.bind('${bSock}/0.control'); s.listen(); time.sleep(20)" >/dev/null 2>&1 &) ; sleep 1; echo ok`,
      );
      assert.equal(prep.code, 0, prep.err);
      const tries: Record<string, string> = {
        "list beta's store": `ls ${B}`,
        "read beta's cred": `cat ${B}/supervisor.creds`,
        "read beta's agent cred": `cat ${B}/agents/b1.creds`,
        "plant in beta's store": `echo X > ${B}/agent.x.creds`,
        "list beta's agents": `ls agents/space.${bHex}`,
        "write beta's agent dir": `echo X > agents/space.${bHex}/b1/f`,
        "list every agents dir": `ls agents`,
        "list beta's sockets": `ls ${bSock}`,
        "dial beta's control socket":
          `python3 -c "import socket; s=socket.socket(socket.AF_UNIX); s.connect('${bSock}/0.control')"`,
        "read beta's log": `cat logs/beta.log`,
        "append beta's log": `echo X >> logs/beta.log`,
        "replace beta's log": `echo X > logs/y && mv -f logs/y logs/beta.log`,
        "read the signer records": `cat secrets/auth/broker.json`,
        "list the signer records": `ls secrets/auth`,
        "read the audit trail": `cat audit/signer.jsonl`,
        "read its own space's $SYS cred": `cat ${A}/connection-evictor.creds`,
        "read beta's $SYS cred": `cat ${B}/connection-evictor.creds`,
        "read delivery's cred": `cat ${A}/delivery.creds`,
        "list the broker dir": `ls broker`,
        "list the auth-service dir": `ls auth-service`,
        "list run/delivery": `ls run/delivery`,
        "link beta's lock": `ln run/manager.${h.instance("beta")}.lock run/mine`,
        "link beta's log": `ln logs/beta.log logs/mine`,
        "link its $SYS cred": `ln ${A}/connection-evictor.creds run/sys`,
        "link delivery's cred": `ln ${A}/delivery.creds logs/d`,
        "chmod the store root": `chmod 777 secrets`,
        "rename run/sockets": `mv run/sockets run/s2`,
      };
      const allowed: string[] = [];
      for (const [what, s] of Object.entries(tries)) {
        const r = await h.sh(h.sup("alpha"), s);
        if (r.code === 0) allowed.push(`${what}: ${r.out.trim().slice(0, 80)}`);
      }
      assert.deepEqual(allowed, []);
    } finally {
      await h.close();
    }
  },
});
