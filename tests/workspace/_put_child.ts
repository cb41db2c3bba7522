// Child process for the crash tests: puts a large value so an RLIMIT_FSIZE set by the parent
// cuts the write short. Prints one JSON line with the outcome.
import { FsSecretStore } from "../../lib/workspace/fs_secret_store.ts";
import { isCotalError } from "../../lib/errors.ts";

const [root, key, mode, size] = Deno.args;
const store = new FsSecretStore(root);
try {
  if (mode === "create") {
    const won = await store.create(key, `${Deno.pid}`);
    console.log(JSON.stringify({ won }));
  } else {
    await store.put(key, "N".repeat(Number(size)));
    console.log(JSON.stringify({ ok: true }));
  }
} catch (err) {
  console.log(
    JSON.stringify(
      isCotalError(err) ? { code: err.code, message: err.message } : { other: String(err) },
    ),
  );
}
