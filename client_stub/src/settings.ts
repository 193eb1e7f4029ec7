/**
 * `geak.*` settings -> what the server receives (initializationOptions, workspace/configuration answers).
 * The server validates values and reports bad ones; here only VS Code's representation is mapped (the settings UI
 * cannot leave a string setting null, so an empty model or endpoint means "not set").
 */

export const SECTION = "geak";

/** Client-only settings: a change needs a new server process. */
export const RESTART_SETTINGS = ["pythonPath"] as const;

export type Device = "auto" | "gpu" | "interpreter";

export interface ServerSettings {
  model: string | null;
  baseUrl: string | null;
  apiKeyEnv: string;
  iterations: number;
  parallel: number;
  checkOnSave: boolean;
  timeOnSave: boolean;
  base: string;
  device: Device;
  gpuId: number | null;
  moduleBudgetS: number | null;
  moduleCasesPerTest: number | null;
}

export const DEFAULTS: ServerSettings = {
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
};

export interface InitializationOptions {
  trusted: boolean;
  clientCommands: true;
  settings: ServerSettings;
}

/** Reads one key of the `geak` section (VS Code: `workspace.getConfiguration("geak").get`). */
export type SettingReader = (key: string) => unknown;

function optionalText(value: unknown): string | null {
  const text = typeof value === "string" ? value.trim() : "";
  return text === "" ? null : text;
}

/** The server's settings; a key the reader does not know gets the protocol's default. */
export function serverSettings(read: SettingReader): ServerSettings {
  const value = <K extends keyof ServerSettings>(key: K): ServerSettings[K] =>
    (read(key) ?? DEFAULTS[key]) as ServerSettings[K];
  return {
    model: optionalText(read("model")),
    baseUrl: optionalText(read("baseUrl")),
    apiKeyEnv: value("apiKeyEnv"),
    iterations: value("iterations"),
    parallel: value("parallel"),
    checkOnSave: value("checkOnSave"),
    timeOnSave: value("timeOnSave"),
    base: value("base"),
    device: value("device"),
    gpuId: value("gpuId"),
    moduleBudgetS: value("moduleBudgetS"),
    moduleCasesPerTest: value("moduleCasesPerTest"),
  };
}

export function initializationOptions(settings: ServerSettings, trusted: boolean): InitializationOptions {
  return { trusted, clientCommands: true, settings };
}

/** What a configuration change asks of the running server. */
export function configurationChange(affects: (setting: string) => boolean): "restart" | "notify" | "none" {
  if (RESTART_SETTINGS.some((key) => affects(`${SECTION}.${key}`))) {
    return "restart";
  }
  return affects(SECTION) ? "notify" : "none";
}
