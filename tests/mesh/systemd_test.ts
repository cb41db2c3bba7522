import assert from "node:assert/strict";
import {
  defaultSystemdLayout,
  renderSysusers,
  renderTmpfiles,
  renderUnits,
  spaceStoreGroup,
  superviseUser,
  UNIT_USERS,
} from "../../lib/mesh/systemd.ts";
import { spaceKeyHex } from "../../lib/workspace/mod.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

const COTAL = new URL("../../cmd/cotal.ts", import.meta.url).pathname;

function directives(text: string): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const line of text.split("\n")) {
    const i = line.indexOf("=");
    if (i <= 0 || line.startsWith("[")) continue;
    const k = line.slice(0, i);
    m.set(k, [...(m.get(k) ?? []), line.slice(i + 1)]);
  }
  return m;
}

const USER_AUTH = { idp: "https://idp.example.test/", host: "127.0.0.1", port: 4280 };

Deno.test("systemd - every service carries its user, the lockdown and the signer exclusion", () => {
  const l = { ...defaultSystemdLayout(["alpha", "beta"]), userAuth: USER_AUTH };
  const units = renderUnits(l);
  const services = Object.keys(units).filter((n) =>
    n.endsWith(".service") && !n.includes("restart")
  );
  assert.equal(services.length, 1 + 4 * 2);
  const users = new Set<string>();
  for (const name of services) {
    const d = directives(units[name]);
    for (const must of ["NoNewPrivileges", "ProtectSystem", "Restart", "User", "ExecStart"]) {
      assert.ok(d.has(must), `${name} lacks ${must}=`);
    }
    assert.deepEqual(d.get("ProtectSystem"), ["strict"]);
    assert.deepEqual(d.get("NoNewPrivileges"), ["yes"]);
    assert.deepEqual(d.get("CapabilityBoundingSet"), [""], `${name} keeps no capability`);
    // The supervisor makes agents' namespaces (bwrap): the one unit allowed to.
    assert.equal(d.has("RestrictNamespaces"), !name.startsWith("cotal-supervise"), name);
    // V8's JIT: every Deno daemon is the exception, the broker (Go) is not.
    assert.equal(d.has("MemoryDenyWriteExecute"), name === "cotal-nats.service", name);
    assert.ok(d.get("ExecStart")![0].startsWith("/"), `${name} runs an absolute path`);
    users.add(d.get("User")![0]);
    const hidden = (d.get("InaccessiblePaths") ?? []).flatMap((v) => v.split(" "));
    if (name.startsWith("cotal-signer")) {
      // The signer: its records, and writes only to the logs and its own space's dir.
      assert.ok(!hidden.some((p) => p.startsWith("/var/lib/cotal/secrets")), name);
    } else if (name.startsWith("cotal-supervise")) {
      // The supervisor: the store (agent creds), never the signer records; it signs remotely.
      assert.deepEqual(hidden, ["/var/lib/cotal/secrets/auth", "/var/lib/cotal/audit"], name);
      // User mode: its agents' bearers come from its own space's auth service.
      const i = name.includes("alpha") ? 0 : 1;
      assert.match(
        d.get("ExecStart")![0],
        new RegExp(` --signer remote --auth-service http://127\\.0\\.0\\.1:${4280 + i}$`),
        name,
      );
      const space = name.includes("alpha") ? "alpha" : "beta";
      assert.ok(d.get("After")!.includes(`cotal-auth-service-${space}.service`), name);
    } else {
      assert.ok(hidden.includes("/var/lib/cotal/secrets"), `${name} must not see the secrets`);
    }
  }
  for (const sp of ["alpha", "beta"]) {
    const signer = directives(units[`cotal-signer-${sp}.service`]);
    assert.deepEqual(signer.get("ReadWritePaths"), [
      `/var/lib/cotal/audit /var/lib/cotal/secrets/space.${spaceKeyHex(sp)}`,
    ]);
    assert.match(signer.get("ExecStart")![0], /^\/usr\/local\/bin\/cotal-signer --root /);
    assert.deepEqual(signer.get("Before"), [`cotal-supervise-${sp}.service`]);
    const sup = directives(units[`cotal-supervise-${sp}.service`]);
    assert.deepEqual(sup.get("Wants"), [
      `cotal-signer-${sp}.service`,
      `cotal-auth-service-${sp}.service`,
    ]);
    // Each space's supervisor is a user of its own, in its space's store group alone.
    assert.deepEqual(sup.get("User"), [superviseUser(sp)]);
    for (const d of [signer, sup]) {
      assert.deepEqual(d.get("SupplementaryGroups"), [`cotal-store ${spaceStoreGroup(sp)}`]);
    }
  }
  assert.notEqual(superviseUser("alpha"), superviseUser("beta"));
  assert.notEqual(spaceStoreGroup("alpha"), spaceStoreGroup("beta"));
  assert.deepEqual(
    [...users].sort(),
    [...Object.values(UNIT_USERS), superviseUser("alpha"), superviseUser("beta")].sort(),
  );
  // Its creds are loaded by systemd from the hidden store: its own, the membership feed's, and
  // the $SYS pair only where the store has it (a missing file would stop the unit starting).
  const loaded = (sp: string, kinds: string[]) =>
    kinds.map((k) => `${k}:/var/lib/cotal/secrets/space.${spaceKeyHex(sp)}/${k}`);
  const base = ["delivery.creds", "membership-rw.creds", "membership.json"];
  const delivery = directives(units["cotal-delivery-alpha.service"]);
  assert.deepEqual(delivery.get("LoadCredential"), loaded("alpha", base));
  assert.match(
    delivery.get("ExecStart")![0],
    /^\/usr\/local\/bin\/cotal-delivery .* --creds-dir \$\{CREDENTIALS_DIRECTORY\} /,
  );
  const withSys = renderUnits({ ...l, sysCreds: ["beta"] });
  assert.deepEqual(
    directives(withSys["cotal-delivery-beta.service"]).get("LoadCredential"),
    loaded("beta", [...base, "membership-observer.creds", "connection-evictor.creds"]),
  );
  assert.deepEqual(
    directives(withSys["cotal-delivery-alpha.service"]).get("LoadCredential"),
    loaded("alpha", base),
  );
  // A re-signed cred of either kind restarts it onto the new one.
  assert.match(units["cotal-delivery-alpha.path"], /PathChanged=.*\/delivery\.creds\n/);
  assert.match(units["cotal-delivery-alpha.path"], /PathChanged=.*\/membership-rw\.creds\n/);
  const sysusers = renderSysusers(["alpha", "beta"]);
  assert.match(sysusers, /^u cotal-delivery -:cotal /m);
  for (const sp of ["alpha", "beta"]) {
    assert.ok(
      sysusers.includes(`\nu ${superviseUser(sp)} -:cotal "Cotal supervisor of space ${sp}" -\n`),
    );
    assert.ok(sysusers.includes(`\nm ${superviseUser(sp)} ${spaceStoreGroup(sp)}\n`));
    assert.ok(sysusers.includes(`\nm cotal-signer ${spaceStoreGroup(sp)}\n`));
  }
  // A user name fits in 31 bytes.
  for (const line of sysusers.split("\n").filter((l) => /^[ug] /.test(l))) {
    assert.ok(line.split(" ")[1].length <= 31, line);
  }
  const tmpfiles = renderTmpfiles(l);
  assert.match(tmpfiles, /^d \/var\/lib\/cotal\/secrets 2710 root cotal-store -$/m);
  assert.ok(
    tmpfiles.includes(
      `\nd /var/lib/cotal/secrets/space.${spaceKeyHex("alpha")} 3770 root ${
        spaceStoreGroup("alpha")
      } -\n`,
    ),
  );
  assert.match(tmpfiles, /^d \/var\/lib\/cotal\/secrets\/auth 0700 cotal-signer cotal-store -$/m);
  assert.match(sysusers, /^m cotal-signer cotal-store$/m);
  // Each space's auth service on its own fixed port, with the IdP it exchanges tokens of.
  const auth = (sp: string) => directives(units[`cotal-auth-service-${sp}.service`]);
  assert.match(
    auth("alpha").get("ExecStart")![0],
    / --listen 127\.0\.0\.1:4280 --idp https:\/\/idp\.example\.test\/$/,
  );
  assert.match(auth("beta").get("ExecStart")![0], / --listen 127\.0\.0\.1:4281 /);
  // Without user auth there is no auth service to run.
  const plain = renderUnits(defaultSystemdLayout(["alpha"]));
  assert.deepEqual(Object.keys(plain).filter((n) => n.includes("auth-service")), []);
});

const hasAnalyze = (() => {
  try {
    return Deno.statSync("/usr/bin/systemd-analyze").isFile;
  } catch {
    return false;
  }
})();

Deno.test({
  name: hasAnalyze
    ? "systemd - systemd-analyze verify accepts every unit"
    : "systemd - systemd-analyze verify (skipped: systemd-analyze is not installed here)",
  ignore: !hasAnalyze,
  async fn() {
    const dir = await tempDir("cotal-units-");
    try {
      // verify checks that ExecStart binaries exist: stand-ins mark where the real ones go.
      await Deno.mkdir(`${dir}/bin`);
      for (
        const b of [
          "cotal-delivery",
          "cotal-supervise",
          "cotal-signer",
          "cotal-auth-service",
          "nats-server",
        ]
      ) {
        await Deno.writeTextFile(`${dir}/bin/${b}`, "#!/bin/sh\n", { mode: 0o755 });
      }
      const units = renderUnits({
        ...defaultSystemdLayout(["alpha"]),
        binDir: `${dir}/bin`,
        natsServer: `${dir}/bin/nats-server`,
        userAuth: USER_AUTH,
      });
      const files: string[] = [];
      for (const [name, text] of Object.entries(units)) {
        await Deno.writeTextFile(`${dir}/${name}`, text);
        files.push(`${dir}/${name}`);
      }
      const out = await new Deno.Command("systemd-analyze", {
        args: ["verify", "--man=no", ...files],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const err = new TextDecoder().decode(out.stderr);
      assert.equal(out.code, 0, err);
      // A broken unit is caught the same way, so a pass above means something.
      await Deno.writeTextFile(`${dir}/broken.service`, "[Service]\nExecStart=relative/x\n");
      const bad = await new Deno.Command("systemd-analyze", {
        args: ["verify", "--man=no", `${dir}/broken.service`],
        stdout: "null",
        stderr: "null",
      }).output();
      assert.notEqual(bad.code, 0);
    } finally {
      await removeTempDir(dir);
    }
  },
});

Deno.test({
  name: hasAnalyze
    ? "systemd - systemd-analyze security scores every unit 2.5 or less"
    : "systemd - systemd-analyze security (skipped: systemd-analyze is not installed here)",
  ignore: !hasAnalyze,
  async fn() {
    const dir = await tempDir("cotal-units-");
    try {
      const units = renderUnits({ ...defaultSystemdLayout(["alpha"]), userAuth: USER_AUTH });
      const services = Object.keys(units).filter((n) => n.endsWith(".service"));
      assert.equal(
        services.length,
        6,
        "broker, delivery, its restart oneshot, signer, supervise, auth",
      );
      for (const name of services) {
        await Deno.writeTextFile(`${dir}/${name}`, units[name]);
        const out = await new Deno.Command("systemd-analyze", {
          args: ["security", "--offline=true", "--no-pager", `${dir}/${name}`],
          stdout: "piped",
          stderr: "piped",
        }).output();
        const text = new TextDecoder().decode(out.stdout);
        const m = /Overall exposure level for \S+: (\d+\.\d)/.exec(text);
        assert.ok(m, `${name}: ${text.slice(-300)}${new TextDecoder().decode(out.stderr)}`);
        assert.ok(Number(m[1]) <= 2.5, `${name} scores ${m[1]}`);
      }
      // The scorer is not lenient: a unit with none of the lockdown scores far above the bar.
      await Deno.writeTextFile(`${dir}/bare.service`, "[Service]\nExecStart=/bin/true\n");
      const bare = new TextDecoder().decode(
        (await new Deno.Command("systemd-analyze", {
          args: ["security", "--offline=true", "--no-pager", `${dir}/bare.service`],
          stdout: "piped",
          stderr: "null",
        }).output()).stdout,
      );
      assert.ok(Number(/Overall exposure level for \S+: (\d+\.\d)/.exec(bare)![1]) > 5, bare);
    } finally {
      await removeTempDir(dir);
    }
  },
});

Deno.test("systemd - install writes units into <dest>/systemd/system, prints every step, and refuses bad input", async () => {
  const dest = await tempDir("cotal-etc-");
  try {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", COTAL, "systemd", "install", "--space", "alpha", "--dest", dest],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    for (
      const f of [
        "systemd/system/cotal-nats.service",
        "systemd/system/cotal-supervise-alpha.service",
        "sysusers.d/cotal.conf",
        "tmpfiles.d/cotal.conf",
      ]
    ) {
      assert.ok((await Deno.stat(`${dest}/${f}`)).isFile, f);
    }
    const said = new TextDecoder().decode(out.stdout);
    for (
      const step of [
        /systemd-sysusers \/etc\/sysusers\.d\/cotal\.conf/,
        /systemd-tmpfiles --create \/etc\/tmpfiles\.d\/cotal\.conf/,
        /systemctl daemon-reload/,
        /systemctl enable --now cotal-nats\.service cotal-delivery-alpha\.service cotal-delivery-alpha\.path cotal-signer-alpha\.service cotal-supervise-alpha\.service\n/,
      ]
    ) assert.match(said, step);
    // The binaries the units run are not installed here: each is named, with how to get it.
    const warned = new TextDecoder().decode(out.stderr);
    for (const p of ["cotal-delivery", "cotal-signer", "cotal-supervise"]) {
      assert.match(
        warned,
        new RegExp(
          `warning: /usr/local/bin/${p} \\(--bin-dir\\) is not an executable file; build the binaries with 'deno task compile'`,
        ),
      );
    }
    assert.doesNotMatch(warned, /cotal-auth-service/, "no user auth, no auth service to run");
    // With every program in place, nothing is said.
    await Deno.mkdir(`${dest}/bin`);
    for (const p of ["cotal-delivery", "cotal-signer", "cotal-supervise", "nats-server"]) {
      await Deno.writeTextFile(`${dest}/bin/${p}`, "#!/bin/sh\n", { mode: 0o755 });
    }
    const placed = await new Deno.Command(Deno.execPath(), {
      args: [
        ...["run", "-A", COTAL, "systemd", "install", "--space", "alpha", "--dest", `${dest}/p`],
        ...["--bin-dir", `${dest}/bin`, "--nats-server", `${dest}/bin/nats-server`],
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(placed.code, 0);
    assert.doesNotMatch(new TextDecoder().decode(placed.stderr), /not an executable file/);
    // No $SYS creds in the (default, absent) state dir: said, with what stays down and the fix.
    assert.match(
      new TextDecoder().decode(placed.stderr),
      /warning: space alpha has no \$SYS creds in \/var\/lib\/cotal\/secrets .* membership view and connection evictions stay down; run 'cotal up --root \/var\/lib\/cotal --space alpha' once if that root was never started .* 'cotal up --root \/var\/lib\/cotal' \(an up whose broker starts re-issues them\)/,
    );
    // A state dir whose broker last ran on another port: the units point there, not at 4222.
    await Deno.mkdir(`${dest}/state/run`, { recursive: true });
    await Deno.writeTextFile(
      `${dest}/state/run/mesh.json`,
      JSON.stringify({ root: `${dest}/state`, host: "127.0.0.1", port: 16222 }),
    );
    const sys = `${dest}/state/secrets/space.${spaceKeyHex("alpha")}`;
    await Deno.mkdir(sys, { recursive: true });
    for (const k of ["membership-observer.creds", "connection-evictor.creds"]) {
      await Deno.writeTextFile(`${sys}/${k}`, "x", { mode: 0o600 });
    }
    const printed = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        COTAL,
        "systemd",
        "print",
        "--space",
        "alpha",
        "--state-dir",
        `${dest}/state`,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(printed.code, 0, new TextDecoder().decode(printed.stderr));
    const units = new TextDecoder().decode(printed.stdout);
    assert.match(units, /--server nats:\/\/127\.0\.0\.1:16222/);
    assert.doesNotMatch(units, /:4222\b/);
    // Its store holds the $SYS pair: the delivery unit loads it, and nothing is said.
    assert.match(units, /LoadCredential=membership-observer\.creds:/);
    assert.match(units, /LoadCredential=connection-evictor\.creds:/);
    assert.doesNotMatch(new TextDecoder().decode(printed.stderr), /no \$SYS creds/);
    // A nats-server from a checkout under /tmp or /home: the units could not see it; said.
    const hidden = await new Deno.Command(Deno.execPath(), {
      args: [
        ...["run", "-A", COTAL, "systemd", "install", "--space", "alpha", "--dest", `${dest}/h`],
        ...["--nats-server", "/home/me/cotal/.cache/nats-server/bin/nats-server"],
        ...["--state-dir", "/tmp/cotal-state"],
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(hidden.code, 0);
    assert.match(
      new TextDecoder().decode(hidden.stderr),
      /warning: --nats-server \/home\/me\/.* is under a directory the units cannot see/,
    );
    assert.match(
      new TextDecoder().decode(hidden.stderr),
      /warning: --state-dir \/tmp\/cotal-state is under a directory the units cannot see .*; use a state dir outside them, such as \/var\/lib\/cotal\./,
    );
    // No user auth here: no auth-service unit.
    assert.equal(
      [...Deno.readDirSync(`${dest}/systemd/system`)].some((e) => e.name.includes("auth")),
      false,
    );
    for (
      const [args, re] of [
        [
          ["systemd", "print", "--space", "alpha", "--bin-dir", "rel/bin"],
          /--bin-dir must be an absolute path/,
        ],
        [["systemd", "print", "--space", "no.dots"], /not a usable space name/],
        [["systemd", "print", "--state-dir", `${dest}/empty`], /No spaces under/],
        [
          ["systemd", "print", "--space", "a", "--idp", "https://i.test/", "--auth-listen", "x"],
          /--auth-listen must be host:port/,
        ],
        [
          ["systemd", "print", "--space", "a", "--idp", "https://i.test/", "--auth-listen", "h:0"],
          /--auth-listen's port must be a whole number from 1 to 65535, not '0'/,
        ],
      ] as const
    ) {
      const r = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", COTAL, ...args],
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(r.code, 2, args.join(" "));
      assert.match(new TextDecoder().decode(r.stderr), re);
    }
  } finally {
    await removeTempDir(dest);
  }
});
