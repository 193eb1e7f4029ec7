import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import {
  configurationChange,
  DEFAULTS,
  initializationOptions,
  RESTART_SETTINGS,
  SECTION,
  serverSettings,
} from "../settings";

interface Property {
  type: string | string[];
  default: unknown;
  markdownDescription?: string;
  description?: string;
}

interface Manifest {
  activationEvents: string[];
  capabilities: { untrustedWorkspaces: { supported: boolean | "limited"; restrictedConfigurations: string[] } };
  contributes: { commands: { command: string }[]; configuration: { properties: Record<string, Property> } };
}

const manifest = JSON.parse(readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8")) as Manifest;
const properties = manifest.contributes.configuration.properties;

describe("serverSettings", () => {
  it("gives the protocol's defaults for keys the reader does not know", () => {
    assert.deepEqual(serverSettings(() => undefined), DEFAULTS);
  });

  it("keeps an empty base: comparing with a revision is off", () => {
    assert.equal(serverSettings((key) => (key === "base" ? "" : undefined)).base, "");
  });

  it("maps an empty model or endpoint (the settings UI's 'not set') to null", () => {
    const values: Record<string, unknown> = { model: "  ", baseUrl: "" };
    const settings = serverSettings((key) => values[key]);
    assert.equal(settings.model, null);
    assert.equal(settings.baseUrl, null);
  });

  it("passes set values through unchanged (the server validates them)", () => {
    const values: Record<string, unknown> = {
      model: " gpt-4.1 ",
      baseUrl: "http://localhost:8000/v1",
      apiKeyEnv: "MY_KEY",
      iterations: 7,
      parallel: 2,
      checkOnSave: false,
      timeOnSave: false,
      base: "main",
      device: "interpreter",
      gpuId: 3,
      moduleBudgetS: 60,
      moduleCasesPerTest: 2,
      pythonPath: "/opt/venv/bin/python",
    };
    assert.deepEqual(serverSettings((key) => values[key]), {
      model: "gpt-4.1",
      baseUrl: "http://localhost:8000/v1",
      apiKeyEnv: "MY_KEY",
      iterations: 7,
      parallel: 2,
      checkOnSave: false,
      timeOnSave: false,
      base: "main",
      device: "interpreter",
      gpuId: 3,
      moduleBudgetS: 60,
      moduleCasesPerTest: 2,
    });
  });
});

describe("initializationOptions", () => {
  it("has the shape LSP_PROTOCOL.md agrees on", () => {
    const options = initializationOptions(DEFAULTS, false);
    assert.deepEqual(JSON.parse(JSON.stringify(options)), {
      trusted: false,
      clientCommands: true,
      settings: {
        model: null,
        baseUrl: null,
        apiKeyEnv: "OPENAI_API_KEY",
        iterations: 3,
        parallel: 1,
        checkOnSave: true,
        timeOnSave: true,
        base: "HEAD",
        device: "auto",
        gpuId: null,
        moduleBudgetS: 20,
        moduleCasesPerTest: 4,
      },
    });
  });
});

describe("configurationChange", () => {
  const changed = (...settings: string[]) => (name: string) =>
    settings.some((s) => s === name || s.startsWith(`${name}.`));

  it("restarts the server for a new interpreter", () => {
    assert.equal(configurationChange(changed("geak.pythonPath")), "restart");
  });

  it("tells the running server about its own settings", () => {
    assert.equal(configurationChange(changed("geak.model")), "notify");
    assert.equal(configurationChange(changed("geak.gpuId")), "notify");
  });

  it("ignores other extensions' settings", () => {
    assert.equal(configurationChange(changed("python.defaultInterpreterPath")), "none");
  });
});

describe("package.json settings", () => {
  it("contributes every server setting and the client-only ones, each described", () => {
    const expected = [...Object.keys(DEFAULTS), ...RESTART_SETTINGS].map((key) => `${SECTION}.${key}`).sort();
    assert.deepEqual(Object.keys(properties).sort(), expected);
    for (const [name, property] of Object.entries(properties)) {
      assert.ok((property.markdownDescription ?? property.description ?? "").length > 20, `${name} has a description`);
    }
  });

  it("declares the protocol's defaults (an empty string stands for null)", () => {
    for (const [key, value] of Object.entries(DEFAULTS)) {
      const declared = properties[`${SECTION}.${key}`].default;
      assert.deepEqual(serverSettings((k) => (k === key ? declared : undefined))[key as keyof typeof DEFAULTS], value, key);
    }
  });

  it("keeps the interpreter and the endpoint out of an untrusted workspace's reach", () => {
    const untrusted = manifest.capabilities.untrustedWorkspaces;
    assert.equal(untrusted.supported, "limited");
    for (const name of ["geak.pythonPath", "geak.baseUrl", "geak.apiKeyEnv"]) {
      assert.ok(untrusted.restrictedConfigurations.includes(name), name);
      assert.ok(name in properties, name);
    }
  });

  it("contributes the four commands and activates on Python files", () => {
    const commands = manifest.contributes.commands.map((c) => c.command);
    for (const command of ["geak.optimizeKernel", "geak.checkFile", "geak.showCandidates", "geak.restartServer"]) {
      assert.ok(commands.includes(command), command);
    }
    assert.ok(manifest.activationEvents.includes("onLanguage:python"));
  });
});
