//===- GPUDeviceBuffers.cpp - a host function's buffers in device memory ---===//
//
// For a public function whose computations all run in gpu.launch ops (the
// elementwise phases mapped to the GPU) and kernel launch calls, keeps
// every buffer in device memory for the whole call:
//   - memref.alloc / memref.dealloc become gpu.alloc / gpu.dealloc;
//   - each memref argument that is used gets a device copy at entry
//     (gpu.alloc + gpu.memcpy host -> device), freed before the return,
//     and copied back before that when the code writes into it in place;
//   - each out-parameter (a memref argument that memref.copy writes, from
//     buffer-results-to-out-params) is filled by a device -> host
//     gpu.memcpy instead;
//   - each constant read with memref.get_global gets a device copy where it
//     is read, freed before the return.
// With host-arguments=false (the resident pipeline) the caller passes
// device buffers: nothing is copied at entry, and the out-parameter copies
// stay on the device.
// Runs after buffer deallocation, which does not understand gpu ops. Any
// host operation left that would read or write a device buffer (a
// memref.load / store or linalg op outside a gpu.launch) is an error:
// the GPU mapping did not cover it.
//
//===----------------------------------------------------------------------===//
#include "moe/GPU/Transforms/Passes.h"

#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::moe {
#define GEN_PASS_DEF_MOEGPUDEVICEBUFFERS
#include "moe/GPU/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

bool onHost(Operation *op) { return !op->getParentOfType<gpu::LaunchOp>(); }

bool isPlainBuffer(MemRefType type) {
  return type.hasStaticShape() && type.getLayout().isIdentity();
}

/// Whether the code writes into `buffer` other than by memref.copy: a
/// store (in a gpu.launch body too), a linalg output, a result of a call
/// (its last operand, or those its #moe.gpu_launch record counts), through
/// views of it.
bool isWrittenInPlace(Value buffer) {
  for (OpOperand &use : buffer.getUses()) {
    Operation *user = use.getOwner();
    if (auto store = dyn_cast<memref::StoreOp>(user)) {
      if (store.getMemRef() == buffer)
        return true;
    } else if (auto linalgOp = dyn_cast<linalg::LinalgOp>(user)) {
      if (linalgOp.isDpsInit(&use))
        return true;
    } else if (auto call = dyn_cast<func::CallOp>(user)) {
      // A kernel launch writes its record's trailing `results` operands;
      // any other call, its last.
      int64_t results = 1;
      if (auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
              call, call.getCalleeAttr()))
        if (auto launch = callee->getAttrOfType<GPULaunchAttr>(
                kGPULaunchAttrName))
          results = launch.getResults();
      if (use.getOperandNumber() + results >= user->getNumOperands())
        return true;
    } else if (isa<ViewLikeOpInterface>(user)) {
      if (llvm::any_of(user->getResults(), isWrittenInPlace))
        return true;
    }
  }
  return false;
}

struct MoeGPUDeviceBuffersPass
    : moe::impl::MoeGPUDeviceBuffersBase<MoeGPUDeviceBuffersPass> {
  using MoeGPUDeviceBuffersBase::MoeGPUDeviceBuffersBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || func.isPrivate())
      return;
    Block &entry = func.getBody().front();
    if (!func.getBody().hasOneBlock()) {
      func.emitOpError("has more than one block; moe-gpu-device-buffers "
                       "expects structured control flow");
      return signalPassFailure();
    }
    Location loc = func.getLoc();
    IRRewriter rewriter(&getContext());

    DenseSet<Value> outParams;
    func.walk([&](memref::CopyOp copy) {
      if (auto arg = dyn_cast<BlockArgument>(copy.getTarget()))
        if (arg.getOwner() == &entry)
          outParams.insert(arg);
    });

    rewriter.setInsertionPointToStart(&entry);
    SmallVector<Value> inputCopies;
    // Arguments the code writes in place (buffer-results-to-out-params lets
    // a result be computed in its out-parameter): copied back at exit.
    SmallVector<std::pair<Value, Value>> writtenArguments;
    for (BlockArgument arg : entry.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type || arg.use_empty())
        continue;
      if (!isPlainBuffer(type)) {
        func.emitOpError("argument #")
            << arg.getArgNumber()
            << " is not a static memref with the identity layout";
        return signalPassFailure();
      }
      if (!hostArguments)
        continue;
      if (outParams.contains(arg)) {
        // Its host memory is written once, by the copy; any other use
        // would touch host memory from the device.
        if (!llvm::all_of(arg.getUsers(), llvm::IsaPred<memref::CopyOp>)) {
          func.emitOpError("argument #")
              << arg.getArgNumber()
              << " is copied into and also used otherwise; "
                 "moe-gpu-device-buffers expects an out-parameter to be "
                 "written by memref.copy only";
          return signalPassFailure();
        }
        continue;
      }
      Value device =
          gpu::AllocOp::create(rewriter, loc, type, /*asyncToken=*/Type(),
                               ValueRange(), ValueRange(), ValueRange(),
                               /*hostShared=*/false)
              .getMemref();
      bool written = isWrittenInPlace(arg);
      arg.replaceAllUsesWith(device);
      gpu::MemcpyOp::create(rewriter, loc, TypeRange(), ValueRange(), device,
                            arg);
      inputCopies.push_back(device);
      if (written)
        writtenArguments.push_back({arg, device});
    }

    // Constants (memref.get_global of a host global): a device copy each,
    // made where the global is read, freed before the return.
    SmallVector<memref::GetGlobalOp> globals;
    func.walk([&](memref::GetGlobalOp op) {
      if (onHost(op) && !op->use_empty())
        globals.push_back(op);
    });
    for (memref::GetGlobalOp global : globals) {
      if (global->getBlock() != &entry) {
        global.emitOpError("reads a global inside a region; "
                           "moe-gpu-device-buffers copies globals to the "
                           "device only at the function's top level");
        return signalPassFailure();
      }
      rewriter.setInsertionPointAfter(global);
      Value device = gpu::AllocOp::create(rewriter, global.getLoc(),
                                          global.getType(), Type(),
                                          ValueRange(), ValueRange(),
                                          ValueRange(), /*hostShared=*/false)
                         .getMemref();
      global.getResult().replaceAllUsesWith(device);
      gpu::MemcpyOp::create(rewriter, global.getLoc(), TypeRange(),
                            ValueRange(), device, global.getResult());
      inputCopies.push_back(device);
    }

    SmallVector<Operation *> ops;
    func.walk([&](Operation *op) {
      if (onHost(op) &&
          isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      rewriter.setInsertionPoint(op);
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        auto device = gpu::AllocOp::create(
            rewriter, op->getLoc(), alloc.getType(), Type(), ValueRange(),
            alloc.getDynamicSizes(), alloc.getSymbolOperands(),
            /*hostShared=*/false);
        rewriter.replaceOp(op, device.getMemref());
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        rewriter.replaceOpWithNewOp<gpu::DeallocOp>(
            op, TypeRange(), ValueRange(), dealloc.getMemref());
      } else {
        auto copy = cast<memref::CopyOp>(op);
        if (!isPlainBuffer(cast<MemRefType>(copy.getSource().getType())) ||
            !isPlainBuffer(cast<MemRefType>(copy.getTarget().getType()))) {
          op->emitOpError("copies a strided or dynamic memref, which cannot "
                          "become one device copy");
          return signalPassFailure();
        }
        rewriter.replaceOpWithNewOp<gpu::MemcpyOp>(
            op, TypeRange(), ValueRange(), copy.getTarget(), copy.getSource());
      }
    }
    rewriter.setInsertionPoint(entry.getTerminator());
    for (auto [host, device] : writtenArguments)
      gpu::MemcpyOp::create(rewriter, loc, TypeRange(), ValueRange(), host,
                            device);
    for (Value device : inputCopies)
      gpu::DeallocOp::create(rewriter, loc, TypeRange(), ValueRange(),
                             device);

    WalkResult left = func.walk([&](Operation *op) {
      if (onHost(op) && isa<memref::LoadOp, memref::StoreOp,
                            linalg::LinalgOp>(op)) {
        op->emitOpError("accesses device memory on the host: the GPU mapping "
                        "did not cover it");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
