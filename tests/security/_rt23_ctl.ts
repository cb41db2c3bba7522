// Red team 23 helper: an operator's control-rail client for a `cotal up` root.
import { ManagerClient } from "../../lib/manager/control_client.ts";
import { mintForRoot } from "../../lib/mesh/ops.ts";
import { runningBroker } from "../../lib/mesh/space.ts";

export async function operatorCtl(root: string, space = "default"): Promise<ManagerClient> {
  const url = (await runningBroker(root))?.url;
  if (!url) throw new Error(`no broker under ${root}`);
  const creds = await mintForRoot(root, space, {
    profile: "control-caller",
    actor: "operator",
    expiresInSeconds: 600,
  });
  return await ManagerClient.connect({ servers: url.split(","), space, creds });
}

if (import.meta.main) {
  const [root, cmd, json] = Deno.args;
  const ctl = await operatorCtl(root);
  const t0 = performance.now();
  try {
    const r = await ctl.request(cmd, JSON.parse(json ?? "{}"), { timeoutMs: 15_000 });
    console.log(Math.round(performance.now() - t0), "ms", JSON.stringify(r).slice(0, 400));
  } catch (e) {
    console.log(Math.round(performance.now() - t0), "ms ERR", (e as Error).message.slice(0, 300));
  }
  await ctl.close?.();
  Deno.exit(0);
}
