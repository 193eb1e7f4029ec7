/**
 * LSP work-done progress (absolute percentages) -> VS Code's `Progress.report` (relative increments).
 */
import type { WorkDoneProgressBegin, WorkDoneProgressEnd, WorkDoneProgressReport } from "vscode-languageclient";

export interface ProgressStep {
  message?: string;
  increment?: number;
}

export class ProgressRelay {
  private percentage = 0;

  step(value: WorkDoneProgressBegin | WorkDoneProgressReport | WorkDoneProgressEnd): ProgressStep | undefined {
    if (value.kind === "end") {
      return undefined;
    }
    const step: ProgressStep = {};
    if (value.message !== undefined) {
      step.message = value.message;
    }
    if (value.percentage !== undefined && value.percentage > this.percentage) {
      step.increment = value.percentage - this.percentage;
      this.percentage = value.percentage;
    }
    return step.message === undefined && step.increment === undefined ? undefined : step;
  }
}
