import { ensureServer, startBrokerProcess } from "../broker/mod.ts";
import { CotalError } from "../errors.ts";

/** Options for {@linkcode up}. */
export interface UpOptions {
  /** The state directory; default `<cwd>/.cotal`. */
  root: string;
  /** The space served by default. */
  space: string;
  host: string;
  port: number;
  /** Progress and result lines. */
  say: (line: string) => void;
  /** Resolves when the operator asks the stack to stop (Ctrl-C, SIGTERM). */
  untilStopped: Promise<void>;
}

function portFree(host: string, port: number): boolean {
  try {
    Deno.listen({ hostname: host, port }).close();
    return true;
  } catch {
    return false;
  }
}

/** Brings the stack up in the foreground and tears it down when asked to stop. */
export async function up(opts: UpOptions): Promise<void> {
  if (!portFree(opts.host, opts.port)) {
    throw new CotalError(
      "port_in_use",
      `${opts.host}:${opts.port} is already in use; stop what listens there or pass --port <n>.`,
    );
  }
  const server = await ensureServer({ onProgress: (l) => opts.say(`nats-server: ${l}`) });
  const brokerDir = `${opts.root}/broker`;
  await Deno.mkdir(`${brokerDir}/js`, { recursive: true, mode: 0o700 });
  const configPath = `${brokerDir}/nats.conf`;
  await Deno.writeTextFile(
    configPath,
    `listen: "${opts.host}:${opts.port}"\njetstream { store_dir: ${
      JSON.stringify(`${brokerDir}/js`)
    } }\n`,
    { mode: 0o600 },
  );
  opts.say(`starting nats-server ${server.version.text} for space '${opts.space}'`);
  const broker = await startBrokerProcess({
    binary: server.path,
    configPath,
    logFile: `${brokerDir}/nats-server.log`,
  });
  opts.say(`broker:  nats://${opts.host}:${opts.port}`);
  opts.say(`state:   ${opts.root}`);
  opts.say("stop:    press Ctrl-C");
  await Promise.race([opts.untilStopped, broker.exited]);
  opts.say("stopping nats-server");
  await broker.stop();
}
