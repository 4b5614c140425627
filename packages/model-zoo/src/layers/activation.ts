/** Parameter-free activation modules (torch.nn.GELU, SiLU, ReLU, Sigmoid, Tanh; HF's QuickGELU) over the op registry. */
import { F, Module, type Tensor } from '@fastkernels/core';

export type GeluApproximate = 'none' | 'tanh';

/** torch.nn.GELU(approximate='none'): exact erf GELU, or the tanh approximation. */
export class GELU extends Module {
  constructor(readonly approximate: GeluApproximate = 'none') {
    super();
    if (approximate !== 'none' && approximate !== 'tanh') throw new RangeError(`GELU: approximate must be 'none' or 'tanh', got '${String(approximate)}'`);
  }

  forward(x: Tensor): Tensor {
    return F.gelu(x, { approximate: this.approximate });
  }
}

/** torch.nn.SiLU(): x * sigmoid(x). */
export class SiLU extends Module {
  forward(x: Tensor): Tensor {
    return F.silu(x);
  }
}

/** torch.nn.ReLU(): max(x, 0). */
export class ReLU extends Module {
  forward(x: Tensor): Tensor {
    return F.relu(x);
  }
}

/** torch.nn.Sigmoid(). */
export class Sigmoid extends Module {
  forward(x: Tensor): Tensor {
    return F.sigmoid(x);
  }
}

/** torch.nn.Tanh(). */
export class Tanh extends Module {
  forward(x: Tensor): Tensor {
    return F.tanh(x);
  }
}

/** HF / CLIP QuickGELU: x * sigmoid(1.702 x). */
export class QuickGELU extends Module {
  forward(x: Tensor): Tensor {
    return F.quickGelu(x);
  }
}
