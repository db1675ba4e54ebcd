//===- LowerGPULaunches.cpp - host code of the GPU kernel launches --------===//
//
// Gives each host function that convert-moe-to-nvgpu declared with a
// `moe.gpu_launch` record (#moe.gpu_launch) its body: the launch of the
// kernel on one stream. It runs after buffer deallocation, which does not
// understand gpu host ops (gpu.wait has unknown effects, and it would free
// gpu.alloc'ed memory with free()).
//
//   func.func private @k_launch(%in0: memref, ..., %out: memref)
//       attributes {moe.gpu_launch = #moe.gpu_launch<...>}
//     ->
//   func.func private @k_launch(%in0, ..., %out) {
//     %t = gpu.wait async                             (a new stream)
//     per input: gpu.alloc of its bytes, memref.view as its type,
//                gpu.memcpy host -> device
//     gpu.alloc of each result's bytes (the record's `results` last ones)
//     per tensor_maps entry: nvgpu.tma.create.descriptor of the device
//       bytes viewed as ui8 [rows, last dimension in bytes] (a box of rank
//       3: [outer, rows, last dimension in bytes]), of the entry's type
//     with `counters` = n: gpu.alloc of n i32 words, gpu.memset to 0
//     gpu.launch_func @kernel (descriptors as !llvm.ptr, then the device
//       addresses of pointers as !llvm.ptr<1>, then the counters' address)
//       with the record's grid, block and dynamic_shared_memory
//     gpu.memcpy device -> each result; gpu.dealloc of every buffer
//     gpu.wait [%t]                                   (synchronize, destroy)
//   }
//
// With device-arguments (the device-resident pipeline) the arguments are
// device buffers already: no allocation and no copy, the descriptors are
// built over the arguments and the kernel writes the result in place. The
// launch is then emitted where the function is called, without a stream of
// its own, and the declaration goes away:
//
//   call @k_launch(%in0, ..., %out)
//     ->
//   per tensor_maps entry: nvgpu.tma.create.descriptor over the argument
//   [gpu.alloc, gpu.memset of the counters]
//   gpu.launch_func @kernel (...)                     (synchronous form)
//   [gpu.dealloc of the counters]
//
// so that the caller's moe-gpu-async-region queues it on the caller's
// stream, in program order with everything else the call does, with no
// stream created and no host synchronization per launch.
//
// With a stream of its own, every step depends on the previous one through
// the async token, so all run in program order on the stream. The
// descriptors are built on ui8 views: MLIR 22's nvgpu lowering passes any
// other byte type to the runtime as bf16 (lib/Runtime/CUDA/TensorMap.h).
//
//===----------------------------------------------------------------------===//
#include "moe/GPU/Transforms/Passes.h"

#include "moe/Dialect/Moe/IR/MoeDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::moe {
#define GEN_PASS_DEF_LOWERMOEGPULAUNCHES
#include "moe/GPU/Transforms/Passes.h.inc"
} // namespace mlir::moe

using namespace mlir;
using namespace mlir::moe;

namespace {

/// Emits the host side of one kernel launch at the builder's insertion
/// point: on a stream of its own, threading one async token through every
/// step, or with synchronous-form ops for the caller to queue on its
/// stream.
class HostLauncher {
public:
  HostLauncher(OpBuilder &b, Location loc, bool ownStream)
      : b(b), loc(loc), ctx(b.getContext()),
        tokenT(gpu::AsyncTokenType::get(ctx)) {
    if (ownStream)
      token = gpu::WaitOp::create(b, loc, tokenT, ValueRange()).getAsyncToken();
  }

  /// A device buffer as large as the memref `type`; returns its bytes.
  Value allocate(MemRefType type) {
    int64_t bytes = type.getNumElements() * type.getElementTypeBitWidth() / 8;
    auto alloc = gpu::AllocOp::create(
        b, loc, MemRefType::get({bytes}, b.getI8Type()), tokenT,
        ValueRange{token}, ValueRange(), ValueRange(), /*hostShared=*/false);
    token = alloc.getAsyncToken();
    buffers.push_back(alloc.getMemref());
    return alloc.getMemref();
  }

  /// `n` i32 words on the device set to zero, freed after the launch.
  Value zeroedWords(int64_t n) {
    auto type = MemRefType::get({n}, b.getI32Type());
    Value zero = arith::ConstantIntOp::create(b, loc, b.getI32Type(), 0);
    if (!token) {
      Value words = gpu::AllocOp::create(b, loc, type, Type(), ValueRange(),
                                         ValueRange(), ValueRange(),
                                         /*hostShared=*/false)
                        .getMemref();
      gpu::MemsetOp::create(b, loc, Type(), ValueRange(), words, zero);
      temporaries.push_back(words);
      return words;
    }
    auto alloc = gpu::AllocOp::create(b, loc, type, tokenT, ValueRange{token},
                                      ValueRange(), ValueRange(),
                                      /*hostShared=*/false);
    buffers.push_back(alloc.getMemref());
    token = gpu::MemsetOp::create(b, loc, tokenT,
                                  ValueRange{alloc.getAsyncToken()},
                                  alloc.getMemref(), zero)
                .getAsyncToken();
    return alloc.getMemref();
  }

  /// Frees the synchronous-form launch's zeroed words after the launch.
  void freeTemporaries() {
    for (Value words : temporaries)
      gpu::DeallocOp::create(b, loc, Type(), ValueRange(), words);
    temporaries.clear();
  }

  /// The device bytes `bytes` as a memref of `type`.
  Value view(Value bytes, MemRefType type) {
    return memref::ViewOp::create(b, loc, type, bytes, index(0), ValueRange());
  }

  void copy(Value dst, Value src) {
    token = gpu::MemcpyOp::create(b, loc, tokenT, ValueRange{token}, dst, src)
                .getAsyncToken();
  }

  /// The device address of `bytes` as a kernel's global pointer.
  Value globalPointer(Value bytes) {
    Value address =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, bytes);
    Value i64 = arith::IndexCastOp::create(b, loc, b.getI64Type(), address);
    return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(ctx, 1),
                                    i64);
  }

  /// The memory of `buffer` (a static identity-layout memref) as ui8 of
  /// `shape` (the last dimension in bytes): a memref descriptor built over its
  /// aligned pointer. memref.view needs an i8 buffer and the arguments of
  /// a device-resident launch are typed; the descriptor's struct is the
  /// LLVM type of the memref, so the cast folds away in the LLVM lowering.
  Value bytesOf(Value buffer, ArrayRef<int64_t> shape) {
    Type i64 = b.getI64Type();
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    int64_t rank = shape.size();
    auto dims = LLVM::LLVMArrayType::get(i64, rank);
    auto descType =
        LLVM::LLVMStructType::getLiteral(ctx, {ptrType, ptrType, i64, dims,
                                               dims});
    Value address =
        memref::ExtractAlignedPointerAsIndexOp::create(b, loc, buffer);
    Value i64Address = arith::IndexCastOp::create(b, loc, i64, address);
    Value pointer = LLVM::IntToPtrOp::create(b, loc, ptrType, i64Address);
    Value desc = LLVM::PoisonOp::create(b, loc, descType);
    auto insert = [&](Value v, ArrayRef<int64_t> position) {
      desc = LLVM::InsertValueOp::create(b, loc, desc, v, position);
    };
    auto constant = [&](int64_t v) {
      return LLVM::ConstantOp::create(b, loc, i64, v);
    };
    insert(pointer, {0});
    insert(pointer, {1});
    insert(constant(0), {2});
    SmallVector<int64_t> strides(rank, 1);
    for (int64_t d = rank - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * shape[d + 1];
    for (int64_t d = 0; d < rank; ++d)
      insert(constant(shape[d]), {3, d});
    for (int64_t d = 0; d < rank; ++d)
      insert(constant(strides[d]), {4, d});
    auto ui8 = IntegerType::get(ctx, 8, IntegerType::Unsigned);
    return UnrealizedConversionCastOp::create(
               b, loc, MemRefType::get(shape, ui8), desc)
        .getResult(0);
  }

  /// A TMA descriptor of `type` over `codes`, a ui8 [rows, cols] memref;
  /// the box is the descriptor's shared-memory tile. Returns the
  /// descriptor's device address, as the kernel takes it.
  Value tensorMap(Value codes, nvgpu::TensorMapDescriptorType type) {
    auto ui8 = IntegerType::get(ctx, 8, IntegerType::Unsigned);
    Value unranked = memref::CastOp::create(
        b, loc, UnrankedMemRefType::get(ui8, Attribute()), codes);
    SmallVector<Value> box;
    for (int64_t size : type.getTensor().getShape())
      box.push_back(index(size));
    Value descriptor =
        nvgpu::TmaCreateDescriptorOp::create(b, loc, type, unranked, box);
    return UnrealizedConversionCastOp::create(
               b, loc, LLVM::LLVMPointerType::get(ctx), descriptor)
        .getResult(0);
  }

  void launch(SymbolRefAttr kernel, ArrayRef<int64_t> grid,
              ArrayRef<int64_t> block, int64_t dynamicSharedMemory,
              ValueRange operands) {
    auto dim3 = [&](ArrayRef<int64_t> v) {
      return gpu::KernelDim3{index(v[0]), index(v[1]), index(v[2])};
    };
    Value smem = arith::ConstantIntOp::create(b, loc, b.getI32Type(),
                                              dynamicSharedMemory);
    if (!token) {
      gpu::LaunchFuncOp::create(b, loc, kernel, dim3(grid), dim3(block), smem,
                                operands);
      return;
    }
    auto op = gpu::LaunchFuncOp::create(b, loc, kernel, dim3(grid),
                                        dim3(block), smem, operands, tokenT,
                                        ValueRange{token});
    token = op.getAsyncToken();
  }

  /// Frees every device buffer and waits for the stream.
  void finish() {
    for (Value buffer : buffers)
      token = gpu::DeallocOp::create(b, loc, tokenT, ValueRange{token}, buffer)
                  .getAsyncToken();
    gpu::WaitOp::create(b, loc, Type(), ValueRange{token});
  }

private:
  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  OpBuilder &b;
  Location loc;
  MLIRContext *ctx;
  Type tokenT;
  Value token;
  SmallVector<Value> buffers;
  SmallVector<Value> temporaries;
};

/// Checks `launch`, the record of `func`, against the signature: what the
/// attribute's verifier cannot see.
LogicalResult verifyLaunchFunction(func::FuncOp func, GPULaunchAttr launch) {
  ArrayRef<Type> args = func.getArgumentTypes();
  // Negative indices are the attribute verifier's.
  auto argIndexValid = [&](int64_t i) {
    return i < static_cast<int64_t>(args.size());
  };
  if (!func.isExternal() || args.empty() || func.getNumResults() != 0 ||
      !llvm::all_of(args,
                    [](Type t) {
                      auto m = dyn_cast<MemRefType>(t);
                      return m && m.hasStaticShape() &&
                             m.getLayout().isIdentity() && m.getRank() > 0;
                    }) ||
      !llvm::all_of(
          launch.getTensorMaps(),
          [&](const TensorMapArg &map) { return argIndexValid(map.index); }) ||
      !llvm::all_of(launch.getPointers(), argIndexValid))
    return func.emitError("a ")
           << kGPULaunchAttrName
           << " function must be a declaration taking static identity-layout "
              "memrefs (inputs, then the result) and returning nothing";
  if (launch.getResults() > static_cast<int64_t>(args.size()))
    return func.emitError("the ")
           << kGPULaunchAttrName << " record's " << launch.getResults()
           << " results exceed the function's " << args.size()
           << " arguments";
  for (const TensorMapArg &map : launch.getTensorMaps()) {
    // The descriptor is over the bytes of the rows: FP8 codes, bf16
    // values two bytes each, or an f32 result four bytes each; its box
    // has at most the argument's rank.
    auto argType = cast<MemRefType>(args[map.index]);
    int64_t width = argType.getElementTypeBitWidth();
    if (width != 8 && width != 16 && width != 32)
      return func.emitError("tensor map argument #")
             << map.index
             << " must have one-, two- or four-byte elements, got "
             << argType;
    int64_t boxRank = map.type.getTensor().getRank();
    if (boxRank < 2 || boxRank > std::max<int64_t>(2, argType.getRank()))
      return func.emitError("tensor map argument #")
             << map.index << " of rank " << argType.getRank()
             << " cannot be viewed with a box of rank " << boxRank;
  }
  return success();
}

/// Emits `launch` on `args` (values of the launch function's argument
/// types) with `host`; `deviceArguments`: the arguments are device buffers
/// already, so the kernel reads and writes them in place, else they are
/// copied to device buffers and the result back.
void emitLaunch(OpBuilder &b, HostLauncher &host, GPULaunchAttr launch,
                ValueRange args, bool deviceArguments) {
  MLIRContext *ctx = b.getContext();
  // The buffers the kernel sees: the arguments themselves, or device
  // copies (as i8 bytes) of them.
  SmallVector<Value> device;
  size_t inputs = args.size() - launch.getResults();
  for (auto [i, arg] : llvm::enumerate(args)) {
    if (deviceArguments) {
      device.push_back(arg);
      continue;
    }
    auto type = cast<MemRefType>(arg.getType());
    Value bytes = host.allocate(type);
    if (i < inputs)
      host.copy(host.view(bytes, type), arg);
    device.push_back(bytes);
  }
  SmallVector<Value> operands;
  for (auto [i, mapType] : launch.getTensorMaps()) {
    auto argType = cast<MemRefType>(args[i].getType());
    // ui8 [outer, ..., bytes per row] of the box's rank: the argument's
    // leading dimensions collapse into the first (checked: 1-, 2- or
    // 4-byte elements, a box of rank 2 up to the argument's).
    ArrayRef<int64_t> shape = argType.getShape();
    int64_t boxRank = mapType.getTensor().getRank();
    SmallVector<int64_t> view(shape.take_back(boxRank - 1));
    view.back() *= argType.getElementTypeBitWidth() / 8;
    int64_t outer = 1;
    for (int64_t size : shape.drop_back(boxRank - 1))
      outer *= size;
    view.insert(view.begin(), outer);
    auto ui8 = IntegerType::get(ctx, 8, IntegerType::Unsigned);
    Value codes = deviceArguments
                      ? host.bytesOf(device[i], view)
                      : host.view(device[i], MemRefType::get(view, ui8));
    operands.push_back(host.tensorMap(codes, mapType));
  }
  for (int64_t i : launch.getPointers())
    operands.push_back(host.globalPointer(device[i]));
  if (launch.getCounters() > 0)
    operands.push_back(
        host.globalPointer(host.zeroedWords(launch.getCounters())));
  host.launch(launch.getKernel(), launch.getGrid(), launch.getBlock(),
              launch.getDynamicSharedMemory(), operands);
  host.freeTemporaries();
  if (!deviceArguments) {
    for (size_t i = inputs; i < args.size(); ++i)
      host.copy(args[i],
                host.view(device[i], cast<MemRefType>(args[i].getType())));
  }
}

/// Gives `func` its body: the launch on a stream of its own, synchronized
/// at the end.
void emitLaunchBody(func::FuncOp func, GPULaunchAttr launch) {
  OpBuilder b(func.getContext());
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  HostLauncher host(b, func.getLoc(), /*ownStream=*/true);
  emitLaunch(b, host, launch, body->getArguments(),
             /*deviceArguments=*/false);
  host.finish();
  func::ReturnOp::create(b, func.getLoc());
  func->removeAttr(kGPULaunchAttrName);
}

/// Replaces every call of `func` with the launch on the call's device
/// arguments, for the caller to queue on its stream, and erases `func`.
LogicalResult emitLaunchesAtCalls(func::FuncOp func, GPULaunchAttr launch,
                                  ModuleOp module) {
  std::optional<SymbolTable::UseRange> uses =
      SymbolTable::getSymbolUses(func, module);
  if (!uses)
    return func.emitError("has uses that are not calls");
  SmallVector<func::CallOp> calls;
  for (const SymbolTable::SymbolUse &use : *uses) {
    auto call = dyn_cast<func::CallOp>(use.getUser());
    if (!call)
      return use.getUser()->emitError("uses kernel launch function @")
             << func.getSymName() << " other than by func.call";
    calls.push_back(call);
  }
  for (func::CallOp call : calls) {
    OpBuilder b(call);
    HostLauncher host(b, call.getLoc(), /*ownStream=*/false);
    emitLaunch(b, host, launch, call.getOperands(), /*deviceArguments=*/true);
    call.erase();
  }
  func.erase();
  return success();
}

/// Emits the module's kernel launches: the bodies of the launch functions,
/// or with device arguments the launches at their calls.
struct LowerMoeGPULaunchesPass
    : moe::impl::LowerMoeGPULaunchesBase<LowerMoeGPULaunchesPass> {
  using LowerMoeGPULaunchesBase::LowerMoeGPULaunchesBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (auto func :
         llvm::make_early_inc_range(module.getOps<func::FuncOp>())) {
      Attribute record = func->getAttr(kGPULaunchAttrName);
      if (!record)
        continue;
      auto launch = dyn_cast<GPULaunchAttr>(record);
      if (!launch) {
        func.emitError() << kGPULaunchAttrName
                         << " must be a #moe.gpu_launch attribute, got "
                         << record;
        return signalPassFailure();
      }
      if (failed(verifyLaunchFunction(func, launch)))
        return signalPassFailure();
      if (!deviceArguments) {
        emitLaunchBody(func, launch);
        continue;
      }
      if (failed(emitLaunchesAtCalls(func, launch, module)))
        return signalPassFailure();
    }
  }
};

} // namespace
