/**
 * A scripted OpenAI-compatible model on loopback: every chat completion proposes the workspace file's kernel
 * section with 1024-element blocks, marked `# latency: 0.5` for the scripted GPU timing (half the original's 1.0).
 */
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export const TEST_SECTION = "\n\ndef test_";

export function proposal(fileText: string): string {
  const kernels = fileText.slice(0, fileText.indexOf(TEST_SECTION) + 1);
  const code = kernels.replaceAll("256", "1024").replace("def add(", "# latency: 0.5\ndef add(");
  return `Wider blocks halve the number of programs.\n\n\`\`\`python\n${code}\`\`\`\n`;
}

export class ScriptedModel {
  requests = 0;
  private readonly server: Server;

  private constructor(server: Server) {
    this.server = server;
  }

  /** Serves proposals for the file at `file` (read at each request). */
  static async start(file: string): Promise<ScriptedModel> {
    const server = createServer();
    const model = new ScriptedModel(server);
    server.on("request", (request, response) => {
      request.resume();
      request.on("end", () => {
        model.requests += 1;
        const content = proposal(readFileSync(file, "utf8"));
        response.setHeader("content-type", "application/json");
        response.end(
          JSON.stringify({
            id: `scripted-${String(model.requests)}`,
            object: "chat.completion",
            created: 0,
            model: "scripted",
            choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
            usage: { prompt_tokens: 100, completion_tokens: 100, total_tokens: 200 },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => {
      server.listen(0, "127.0.0.1", resolve);
    });
    return model;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${String((this.server.address() as AddressInfo).port)}/v1`;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => {
        resolve();
      });
    });
  }
}
