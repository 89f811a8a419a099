"""GPU lowering: scheduled loop IR -> a host program launching device kernels.

    program = lower_gpu(sch.func, Target("opencl"))     # see pipeline.py
    program.lowered        the whole lowered Func (thread loops kept, barriers inserted): interpretable
    program.kernels        DeviceKernel(func, grid, block, shared_bytes) in launch order

One pass per file; each is a pure `run(func, target) -> Func` except split_host_device, which
returns the GpuProgram.
"""
