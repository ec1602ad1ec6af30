"""``python -m dsh_kernel``: launch the kernel (as kernelspecs do), or ``install`` the kernelspecs."""

from __future__ import annotations

import sys


def main() -> int:
    """``python -m dsh_kernel install …`` installs the kernelspecs; anything else starts the kernel."""
    if len(sys.argv) > 1 and sys.argv[1] == "install":
        from dsh_kernel.kernel.kernelspec import main as install_main

        return install_main(sys.argv[2:])
    from ipykernel.kernelapp import IPKernelApp

    from dsh_kernel.kernel.kernel import DshKernel

    IPKernelApp.launch_instance(kernel_class=DshKernel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
