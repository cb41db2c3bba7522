import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { FsSecretStore, workspaceSecretStore } from "../../lib/workspace/fs_secret_store.ts";
import { isCotalError } from "../../lib/errors.ts";

async function withRoot(fn: (root: string, store: FsSecretStore) => Promise<void>): Promise<void> {
  const root = await Deno.makeTempDir({ prefix: "cotal-store-" });
  try {
    await fn(root, new FsSecretStore(`${root}/secrets`));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
}

async function rejectsWith(p: Promise<unknown>, code: CotalErrorCode, mustNotContain?: string) {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(isCotalError(err, code), `expected ${code}, got ${String(err)}`);
    if (mustNotContain !== undefined) assert.ok(!err.message.includes(mustNotContain));
    return true;
  });
}

function mode(info: Deno.FileInfo): number {
  return (info.mode ?? 0) & 0o777;
}

async function entries(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const e of Deno.readDir(dir)) names.push(e.name);
  return names.sort();
}

Deno.test("workspace - put, get, create and delete round-trip", async () => {
  await withRoot(async (_root, store) => {
    assert.equal(await store.get("space.ab/delivery.creds"), undefined);
    await store.put("space.ab/delivery.creds", "one");
    assert.equal(await store.get("space.ab/delivery.creds"), "one");
    await store.put("space.ab/delivery.creds", "two");
    assert.equal(await store.get("space.ab/delivery.creds"), "two");
    assert.equal(await store.create("space.ab/delivery.creds", "three"), false);
    assert.equal(await store.get("space.ab/delivery.creds"), "two");
    assert.equal(await store.create("auth/broker.json", "{}"), true);
    assert.equal(await store.get("auth/broker.json"), "{}");
    await store.delete("space.ab/delivery.creds");
    await store.delete("space.ab/delivery.creds");
    await store.delete("never/was");
    assert.equal(await store.get("space.ab/delivery.creds"), undefined);
  });
});

Deno.test("workspace - refuses malformed keys with store_bad_key", async () => {
  await withRoot(async (root, store) => {
    const bad = [
      "",
      "a\0b",
      "/etc/passwd",
      "..",
      "../outside",
      "space.ab/../../outside",
      "a/./b",
      "a\\b",
      "a//b",
      "a/",
      "space.ab/.cotal-tmp-1234",
    ];
    for (const key of bad) {
      await rejectsWith(store.get(key), "store_bad_key");
      await rejectsWith(store.put(key, "v"), "store_bad_key");
      await rejectsWith(store.create(key, "v"), "store_bad_key");
      await rejectsWith(store.delete(key), "store_bad_key");
    }
    // Nothing was written anywhere, not even the root.
    assert.deepEqual(await entries(root), []);
  });
});

Deno.test("workspace - refuses a key through a symlinked directory", async () => {
  await withRoot(async (root, store) => {
    const elsewhere = `${root}/elsewhere`;
    await Deno.mkdir(elsewhere);
    await Deno.writeTextFile(`${elsewhere}/delivery.creds`, "outside");
    await store.put("seed", "x");
    await Deno.symlink(elsewhere, `${root}/secrets/space.ab`);
    const key = "space.ab/delivery.creds";
    await rejectsWith(store.get(key), "store_symlink");
    await rejectsWith(store.put(key, "SECRET-VALUE-1"), "store_symlink", "SECRET-VALUE-1");
    await rejectsWith(store.create("space.ab/new", "v"), "store_symlink");
    await rejectsWith(store.delete(key), "store_symlink");
    // A symlink deeper down is refused too.
    await Deno.mkdir(`${root}/secrets/auth`);
    await Deno.symlink(elsewhere, `${root}/secrets/auth/deep`);
    await rejectsWith(store.put("auth/deep/x", "v"), "store_symlink");
    assert.deepEqual(await entries(elsewhere), ["delivery.creds"]);
    assert.equal(await Deno.readTextFile(`${elsewhere}/delivery.creds`), "outside");
  });
});

Deno.test("workspace - refuses a symlinked final file, dangling or not", async () => {
  await withRoot(async (root, store) => {
    const target = `${root}/target`;
    await Deno.writeTextFile(target, "TARGET-BYTES");
    await store.put("space.ab/other", "x");
    await Deno.symlink(target, `${root}/secrets/space.ab/delivery.creds`);
    const key = "space.ab/delivery.creds";
    await rejectsWith(store.get(key), "store_symlink", "TARGET-BYTES");
    await rejectsWith(store.put(key, "new"), "store_symlink");
    await rejectsWith(store.create(key, "new"), "store_symlink");
    await rejectsWith(store.delete(key), "store_symlink");
    assert.equal(await Deno.readTextFile(target), "TARGET-BYTES");
    assert.ok((await Deno.lstat(`${root}/secrets/${key}`)).isSymlink);

    await Deno.symlink(`${root}/missing`, `${root}/secrets/space.ab/dangling`);
    await rejectsWith(store.create("space.ab/dangling", "v"), "store_symlink");
    await rejectsWith(store.put("space.ab/dangling", "v"), "store_symlink");
    await assert.rejects(Deno.lstat(`${root}/missing`), Deno.errors.NotFound);
  });
});

Deno.test("workspace - refuses a file where a directory belongs, and a directory as a key", async () => {
  await withRoot(async (_root, store) => {
    await store.put("space.ab", "i am a file");
    await rejectsWith(store.put("space.ab/delivery.creds", "v"), "store_not_dir");
    await rejectsWith(store.get("space.ab/delivery.creds"), "store_not_dir");
    await store.put("auth/x", "v");
    await rejectsWith(store.get("auth"), "store_not_file");
    await rejectsWith(store.put("auth", "v"), "store_not_file");
  });
});

Deno.test("workspace - 0700 directories and 0600 files under umask 000", async () => {
  const previous = Deno.umask(0o000);
  try {
    await withRoot(async (root, store) => {
      await store.put("space.ab/delivery.creds", "v");
      assert.equal(await store.create("auth/space.cd/issuer.json", "v"), true);
      for (const dir of ["secrets", "secrets/space.ab", "secrets/auth", "secrets/auth/space.cd"]) {
        assert.equal(mode(await Deno.stat(`${root}/${dir}`)), 0o700, dir);
      }
      assert.equal(mode(await Deno.stat(`${root}/secrets/space.ab/delivery.creds`)), 0o600);
      assert.equal(mode(await Deno.stat(`${root}/secrets/auth/space.cd/issuer.json`)), 0o600);

      // A directory another tool left world-readable is tightened on the next write.
      await Deno.mkdir(`${root}/secrets/loose`, { mode: 0o755 });
      await Deno.chmod(`${root}/secrets/loose`, 0o755);
      await store.put("loose/key", "v");
      assert.equal(mode(await Deno.stat(`${root}/secrets/loose`)), 0o700);
      assert.equal(mode(await Deno.stat(`${root}/secrets/loose/key`)), 0o600);
    });
  } finally {
    Deno.umask(previous);
  }
});

Deno.test("workspace - a setgid directory closed to others is kept as the operator shared it; any other mode is tightened", async () => {
  await withRoot(async (root, store) => {
    await store.put("seed/key", "v");
    const cases: [string, number, number][] = [
      // systemd's layout: the store root (group may pass) and a space dir (group may write).
      ["shared-pass", 0o2710, 0o2710],
      ["shared-write", 0o2770, 0o2770],
      // Setgid does not excuse access for others, and group access without it is a umask's.
      ["setgid-open", 0o2775, 0o700],
      ["group-only", 0o770, 0o700],
    ];
    for (const [dir, given] of cases) {
      await Deno.mkdir(`${root}/secrets/${dir}`);
      await Deno.chmod(`${root}/secrets/${dir}`, given);
      await store.put(`${dir}/key`, "v");
    }
    for (const [dir, , kept] of cases) {
      const m = (await Deno.stat(`${root}/secrets/${dir}`)).mode! & 0o7777;
      assert.equal(m.toString(8), kept.toString(8), dir);
      assert.equal(mode(await Deno.stat(`${root}/secrets/${dir}/key`)), 0o600, dir);
    }
    // The root itself follows the same rule.
    await Deno.chmod(`${root}/secrets`, 0o2710);
    await store.put("seed/key", "w");
    assert.equal(((await Deno.stat(`${root}/secrets`)).mode! & 0o7777).toString(8), "2710");
    await Deno.chmod(`${root}/secrets`, 0o711);
    await store.put("seed/key", "x");
    assert.equal(((await Deno.stat(`${root}/secrets`)).mode! & 0o7777).toString(8), "700");
  });
});

Deno.test("workspace - put leaves no temp file behind", async () => {
  await withRoot(async (root, store) => {
    for (let i = 0; i < 5; i++) await store.put("space.ab/delivery.creds", `v${i}`);
    assert.equal(await store.create("space.ab/delivery.creds", "lost"), false);
    assert.equal(await store.create("space.ab/fresh", "won"), true);
    assert.deepEqual(await entries(`${root}/secrets/space.ab`), ["delivery.creds", "fresh"]);
  });
});

async function runChild(
  root: string,
  args: string[],
  shellPrefix: string,
): Promise<{ status: Deno.CommandStatus; line: string }> {
  const child = new URL("./_put_child.ts", import.meta.url).pathname;
  const quote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;
  const script = `${shellPrefix} exec ${quote(Deno.execPath())} run --no-config --no-code-cache ` +
    `--allow-read --allow-write ${quote(child)} ${args.map(quote).join(" ")}`;
  // A private DENO_DIR keeps Deno's own cache files small, so the file-size limit below
  // bites in the store's write and not in Deno's start-up.
  const out = await new Deno.Command("bash", {
    args: ["-c", script],
    env: { DENO_DIR: `${root}/deno-dir` },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { status: out, line: new TextDecoder().decode(out.stdout).trim() };
}

Deno.test("workspace - a write that fails part-way keeps the old value and no temp", async () => {
  await withRoot(async (root, store) => {
    await store.put("space.ab/delivery.creds", "old-value");
    // RLIMIT_FSIZE of 1 MiB with SIGXFSZ ignored: the 4 MiB write gets a short write, then EFBIG.
    const { status, line } = await runChild(
      root,
      [`${root}/secrets`, "space.ab/delivery.creds", "put", String(4 << 20)],
      "trap '' XFSZ; ulimit -f 1024;",
    );
    assert.ok(status.success, line);
    const result = JSON.parse(line);
    assert.equal(result.code, "store_io", line);
    assert.ok(!result.message.includes("NNNN"));
    assert.equal(await store.get("space.ab/delivery.creds"), "old-value");
    assert.deepEqual(await entries(`${root}/secrets/space.ab`), ["delivery.creds"]);
  });
});

Deno.test("workspace - a process killed mid-write never replaces the old value", async () => {
  await withRoot(async (root, store) => {
    await store.put("space.ab/delivery.creds", "old-value");
    // Same limit with SIGXFSZ at its default action: the kernel kills the writer mid-file.
    const { status, line } = await runChild(
      root,
      [`${root}/secrets`, "space.ab/delivery.creds", "put", String(4 << 20)],
      "ulimit -f 1024;",
    );
    assert.equal(status.success, false);
    assert.equal(line, "");
    assert.equal(await store.get("space.ab/delivery.creds"), "old-value");
    // The torn temp may survive the crash, but it is not a readable key and does not block
    // the next put.
    const names = await entries(`${root}/secrets/space.ab`);
    // A torn temp proves the child died inside the store's write, not during start-up.
    assert.ok(names.some((n) => n.startsWith(".cotal-tmp-")), names.join(","));
    for (const name of names) {
      assert.ok(name === "delivery.creds" || name.startsWith(".cotal-tmp-"), name);
    }
    await store.put("space.ab/delivery.creds", "new-value");
    assert.equal(await store.get("space.ab/delivery.creds"), "new-value");
  });
});

Deno.test("workspace - concurrent creates in one process: exactly one wins", async () => {
  await withRoot(async (_root, store) => {
    for (let i = 0; i < 40; i++) {
      const key = `space.ab/race-${i}`;
      const results = await Promise.all([store.create(key, "a"), store.create(key, "b")]);
      assert.equal(results.filter((r) => r).length, 1, `round ${i}: ${results}`);
      assert.equal(await store.get(key), results[0] ? "a" : "b");
    }
  });
});

Deno.test("workspace - concurrent creates across processes: exactly one wins", async () => {
  await withRoot(async (root, store) => {
    await store.put("warm", "x");
    const runs = await Promise.all(
      Array.from(
        { length: 4 },
        () => runChild(root, [`${root}/secrets`, "space.ab/k", "create"], ""),
      ),
    );
    const wins = runs.map((r) => JSON.parse(r.line).won);
    assert.equal(wins.filter((w) => w === true).length, 1, JSON.stringify(wins));
    assert.equal(wins.filter((w) => w === false).length, 3, JSON.stringify(wins));
    assert.deepEqual(await entries(`${root}/secrets/space.ab`), ["k"]);
  });
});

Deno.test("workspace - workspaceSecretStore roots at <root>/secrets", async () => {
  const root = await Deno.makeTempDir({ prefix: "cotal-ws-" });
  try {
    const store = workspaceSecretStore(`${root}/`);
    assert.equal(store.root, `${root}/secrets`);
    await store.put("space.ab/delivery.creds", "v");
    assert.equal(await Deno.readTextFile(`${root}/secrets/space.ab/delivery.creds`), "v");
    assert.throws(() => workspaceSecretStore(""), (e) => isCotalError(e, "store_bad_root"));
    assert.throws(() => new FsSecretStore("a\0b"), (e) => isCotalError(e, "store_bad_root"));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("workspace - a root that is a file is refused", async () => {
  await withRoot(async (root) => {
    await Deno.writeTextFile(`${root}/file`, "x");
    const store = new FsSecretStore(`${root}/file`);
    await rejectsWith(store.put("k", "v"), "store_bad_root");
    await rejectsWith(store.get("k"), "store_bad_root");
  });
});
