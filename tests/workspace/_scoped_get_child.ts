/**
 * Child process for the scoped-read test: reads one key through FsSecretStore while Deno grants
 * read on that key's directory only (as the delivery daemon's permission row does). Prints the
 * value, or the error's class and code.
 */
import { FsSecretStore } from "../../lib/workspace/fs_secret_store.ts";

const [root, key] = Deno.args;
try {
  console.log(`value:${await new FsSecretStore(root).get(key)}`);
} catch (err) {
  console.log(`error:${(err as { code?: string }).code ?? (err as Error).name}`);
}
