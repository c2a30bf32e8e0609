# ptq: plain Makefile with auto-dependencies.
#   make            build ./ptq
#   make test       install what is missing, then run every test (tests/run.sh)
#   make demo       install what is missing, then quantize PP-OCRv4 det on real photos
#   make bench      speed and memory against ONNX Runtime, measured in the same run
#   make deps       install Debian packages and fetch models and test oracles
#   make SANITIZE=1 test    ASan + UBSan
#   make faults     every allocation of inspect/quantize/compare/translate failed in turn (tests/e2e/faults.sh,
#                   one run per command through the shim's fork server)
#   make fuzz       libFuzzer harnesses (clang, ASan + UBSan), each run FUZZ_SECONDS on a seed corpus
#   make lib        build/libptq.a, build/libptq.so.0 (+ libptq.so), build/ptq.pc: the C API of include/ptq.h
#   make install PREFIX=/usr/local    bin/ptq, lib/libptq.*, include/ptq.h, lib/pkgconfig/ptq.pc, share/ptq/configs,
#                   share/man/man1/ptq.1, share/bash-completion/completions/ptq
#   make man        build/ptq.1, generated from the binary's --help texts
#   make wheel      build/wheel/ptq-*.whl: the Python package with libptq.so.0 and the presets inside

CC       ?= gcc
BUILD    ?= build
ONNX_PROTO ?= /usr/lib/python3/dist-packages/onnx/onnx.proto

OPT      ?= -O2 -g
WARN     := -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla \
            -Wdouble-promotion -Werror
# -fPIC -fvisibility=hidden: the same objects make ptq, libptq.a and libptq.so, which exports only
# the PTQ_API functions of include/ptq.h (hidden symbols are addressed PC-relative, as in the PIE ptq).
BASE     := -std=c11 -D_GNU_SOURCE -fopenmp -fno-strict-aliasing -fPIC -fvisibility=hidden -MMD -MP -I. -I$(BUILD)/gen \
            -I/usr/include/x86_64-linux-gnu -DPTQ_HAVE_LIBDEFLATE
LIBS     := -lprotobuf-c -ljpeg -lpng -ldeflate -lz -lcjson -lyaml -lm -fopenmp -lpthread
ifeq ($(SANITIZE),1)
  BASE   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LIBS   += -fsanitize=address,undefined
  BUILD  := build-san
endif

LIB_DIRS := runtime runtime/ops runtime/kernels io preprocess calib quant engine
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_SRC  := $(filter-out runtime/ops/TEMPLATE.c,$(LIB_SRC))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/onnx.pb-c.o
CLI_SRC  := $(wildcard cli/*.c)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_SRC := $(wildcard tests/unit/test_*.c)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
GEN_H    := $(BUILD)/gen/onnx.pb-c.h

# Fuzzing (tests/fuzz): the library built again with clang, -fsanitize=fuzzer-no-link,address,
# undefined, in build-fuzz/; each harness linked with libFuzzer. The gcc build also links every
# harness with tests/fuzz/replay.c (build/fuzz-replay/) so that make test replays the regression
# inputs and seeds without clang.
FUZZ_BUILD   := build-fuzz
FUZZ_CC      ?= clang
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_SECONDS ?= 60
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o) $(FUZZ_BUILD)/obj/gen/onnx.pb-c.o
FUZZ_BIN     := $(FUZZ_NAMES:%=$(FUZZ_BUILD)/fuzz_%)
REPLAY_BIN   := $(FUZZ_NAMES:%=$(BUILD)/fuzz-replay/fuzz_%)

PREFIX   ?= /usr/local
VERSION  := 0.1.0
SOVER    := 0

.PHONY: all ptq tests test demo bench deps clean fuzz fuzzers lib install man wheel faults
all: ptq

ptq: $(BUILD)/ptq
	@ln -sf $(BUILD)/ptq ptq

# Objects are linked whole (not through an archive): ops.c refers to each op's
# definition weakly, and a weak reference does not pull a member out of an archive.
$(BUILD)/ptq: $(CLI_OBJ) $(LIB_OBJ)
	$(CC) -o $@ $(CLI_OBJ) $(LIB_OBJ) $(LIBS)

# The library: include/ptq.h over engine/ (engine/api.c). The archive holds one relocatable object
# (ld -r of every object, hidden symbols made local): a program that uses one function gets all of
# it, weak op definitions included (see above), and no internal name can clash with the program's.
lib: $(BUILD)/libptq.a $(BUILD)/libptq.so.$(SOVER) $(BUILD)/ptq.pc

$(BUILD)/libptq.a: $(LIB_OBJ)
	$(LD) -r -o $(BUILD)/obj/libptq-all.o $(LIB_OBJ)
	objcopy --localize-hidden $(BUILD)/obj/libptq-all.o
	rm -f $@ && ar rcs $@ $(BUILD)/obj/libptq-all.o

$(BUILD)/libptq.so.$(SOVER): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,libptq.so.$(SOVER) -Wl,--no-undefined -o $@ $(LIB_OBJ) $(LIBS)
	ln -sf libptq.so.$(SOVER) $(BUILD)/libptq.so

$(BUILD)/ptq.pc: Makefile
	@mkdir -p $(BUILD)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' '' \
	  'Name: ptq' 'Description: post-training quantization of ONNX image models for TensorRT' 'Version: $(VERSION)' \
	  'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lptq' \
	  'Libs.private: $(LIBS)' > $@

# The man page comes from the binary's own --help texts (scripts/man.sh): it cannot disagree with them.
man: $(BUILD)/ptq.1
$(BUILD)/ptq.1: $(BUILD)/ptq scripts/man.sh
	scripts/man.sh $(BUILD)/ptq > $@.tmp && mv $@.tmp $@

# The Python package as a wheel that carries the library and the presets (python/ptq/_capi.py finds
# a libptq.so.0 beside the package first): pip install build/wheel/ptq-*.whl, nothing else to set.
wheel: lib
	rm -rf $(BUILD)/wheel $(BUILD)/wheel-src && mkdir -p $(BUILD)/wheel && cp -r python $(BUILD)/wheel-src
	mkdir -p $(BUILD)/wheel-src/ptq/configs
	cp $(BUILD)/libptq.so.$(SOVER) $(BUILD)/wheel-src/ptq/ && cp configs/*.yaml $(BUILD)/wheel-src/ptq/configs/
	cd $(BUILD)/wheel-src && PIP_ROOT_USER_ACTION=ignore /usr/bin/python3 -m pip wheel -q --no-deps --no-build-isolation \
	  --no-index -w ../wheel .
	@ls $(BUILD)/wheel/*.whl

install: ptq lib man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/share/ptq/configs $(DESTDIR)$(PREFIX)/share/man/man1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 644 $(BUILD)/ptq.1 $(DESTDIR)$(PREFIX)/share/man/man1/ptq.1
	install -m 644 scripts/ptq-completion.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/ptq
	install -m 755 $(BUILD)/ptq $(DESTDIR)$(PREFIX)/bin/ptq
	install -m 644 $(BUILD)/libptq.a $(DESTDIR)$(PREFIX)/lib/libptq.a
	install -m 755 $(BUILD)/libptq.so.$(SOVER) $(DESTDIR)$(PREFIX)/lib/libptq.so.$(SOVER)
	ln -sf libptq.so.$(SOVER) $(DESTDIR)$(PREFIX)/lib/libptq.so
	install -m 644 include/ptq.h $(DESTDIR)$(PREFIX)/include/ptq.h
	install -m 644 configs/*.yaml $(DESTDIR)$(PREFIX)/share/ptq/configs/
	sed 's|^prefix=.*|prefix=$(PREFIX)|' $(BUILD)/ptq.pc > $(DESTDIR)$(PREFIX)/lib/pkgconfig/ptq.pc

# ONNX bindings generated from the schema Debian's python3-onnx ships; never committed.
$(BUILD)/gen/onnx.pb-c.c $(GEN_H) &: $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen
	@test -f $(ONNX_PROTO) || { echo "missing $(ONNX_PROTO): run 'make deps'"; exit 1; }
	cp $(ONNX_PROTO) $(BUILD)/gen/onnx.proto
	cd $(BUILD)/gen && protoc-c --c_out=. onnx.proto

# The source commit `ptq --version` prints (build/gen/version.h, rewritten only when it changes):
# git's short hash, "-dirty" with uncommitted changes, "unknown" outside a git checkout.
COMMIT   := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git rev-parse HEAD >/dev/null 2>&1 && \
              ! git diff --quiet HEAD -- 2>/dev/null && echo -dirty)
$(shell mkdir -p $(BUILD)/gen && echo '#define PTQ_SOURCE_COMMIT "$(COMMIT)"' | cmp -s - $(BUILD)/gen/version.h || \
        echo '#define PTQ_SOURCE_COMMIT "$(COMMIT)"' > $(BUILD)/gen/version.h)

# Objects depend on the compile flags: a change of BASE or WARN (e.g. -fPIC) rebuilds them all.
FLAGS_STAMP := $(BUILD)/obj/.flags
$(shell mkdir -p $(BUILD)/obj && echo '$(CC) $(BASE) $(WARN)' | cmp -s - $(FLAGS_STAMP) || echo '$(CC) $(BASE) $(WARN)' > $(FLAGS_STAMP))

$(BUILD)/obj/gen/onnx.pb-c.o: $(BUILD)/gen/onnx.pb-c.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(OPT) -w -c $< -o $@

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP) | $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(BASE) $(OPT) $(WARN) -c $< -o $@

$(BUILD)/tests/%: $(BUILD)/obj/tests/unit/%.o $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LIB_OBJ) $(LIBS)

tests: $(TEST_BIN) $(REPLAY_BIN) $(BUILD)/fault/failalloc.so

# The allocation-failure shim (tests/fault/failalloc.c, LD_PRELOAD; its fork server tries every
# point of a command in one run, tests/fault/check_points.py judges them): tests/e2e/faults.sh
# tries every k-th failure point in make test; make faults tries every one.
$(BUILD)/fault/failalloc.so: tests/fault/failalloc.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -g -fPIC -shared $(WARN) -Wno-missing-prototypes -o $@ $<

faults: ptq $(BUILD)/fault/failalloc.so
	@BUILD=$(BUILD) FAULTS=all tests/e2e/faults.sh

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(LIB_OBJ) $(LIBS)


$(FUZZ_BUILD)/obj/gen/onnx.pb-c.o: $(BUILD)/gen/onnx.pb-c.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(BASE) -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link -w -c $< -o $@

$(FUZZ_BUILD)/obj/%.o: %.c | $(GEN_H)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(BASE) -O1 -g $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(FUZZ_ISA) -w -c $< -o $@
$(FUZZ_BUILD)/obj/runtime/kernels/sgemm_avx2.o: FUZZ_ISA := -mavx2 -mfma
$(FUZZ_BUILD)/obj/runtime/kernels/depthwise_avx2.o: FUZZ_ISA := -mavx2
$(FUZZ_BUILD)/obj/runtime/kernels/sgemm_avx512.o: FUZZ_ISA := -mavx512f -mfma
$(FUZZ_BUILD)/obj/calib/calib_avx2.o: FUZZ_ISA := -mavx2
$(FUZZ_BUILD)/obj/calib/calib_avx512.o: FUZZ_ISA := -mavx512f

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIB_OBJ)
	$(FUZZ_CC) -fsanitize=fuzzer $(FUZZ_SAN) -fopenmp -o $@ $< $(FUZZ_LIB_OBJ) $(filter-out -fopenmp,$(LIBS))

$(BUILD)/fuzz-replay/fuzz_%: $(BUILD)/obj/tests/fuzz/fuzz_%.o $(BUILD)/obj/tests/fuzz/replay.o $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -o $@ $< $(BUILD)/obj/tests/fuzz/replay.o $(LIB_OBJ) $(LIBS)

fuzzers: $(FUZZ_BIN)

fuzz: deps
	@$(MAKE) --no-print-directory ptq fuzzers
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh

deps:
	@scripts/deps.sh

test: deps
	@$(MAKE) --no-print-directory ptq tests
	@BUILD=$(BUILD) tests/run.sh

demo: deps
	@$(MAKE) --no-print-directory ptq
	@scripts/demo.sh

bench: deps
	@$(MAKE) --no-print-directory ptq $(BUILD)/bench/gemm
	@BUILD=$(BUILD) bench/run.sh
	@BUILD=$(BUILD) bench/preprocess.sh
	@BUILD=$(BUILD) bench/calibrate.sh
	@BUILD=$(BUILD) bench/quality.sh
	@BUILD=$(BUILD) bench/ort_sensitivity.sh
	@BUILD=$(BUILD) bench/ocr_cer.sh
	@# the refinements' cost next to the calibration pass
	@PTQ=$(BUILD)/ptq bench/refine.sh
	@# the recipes' cost: balanced and best against fast (the calibration pass), 256 images
	@PTQ=$(BUILD)/ptq bench/recipes.sh
	@# truth: OCR CER, cls top-1 and a trained U-Net's IoU against labelled data, with bootstrap intervals
	@BUILD=$(BUILD) bench/truth.sh
	@# truth per family: a trained detector, ViT and ConvNeXt; ptq's recipes beside ORT quantize_static, against the labels
	@BUILD=$(BUILD) bench/truth_families.sh
	@# zoo: every scripts/zoo.py model (torchvision 0.14, YOLO-like) through run/calibrate/quantize/compare
	@BUILD=$(BUILD) bench/zoo.sh
	@# models as shipped: float16, uint8 NHWC, gray, dynamic H/W, opset 11, Ultralytics metadata (scripts/variants.py)
	@BUILD=$(BUILD) bench/variants.sh
	@# every speed and memory figure next to its target: share of the FMA peak, threads, against ORT, recipes, memory
	@BUILD=$(BUILD) bench/targets.sh

clean:
	rm -rf build build-san build-fuzz ptq

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# The runtime's kernels: -O3 (the full vectoriser cost model); still no -ffast-math.
$(BUILD)/obj/runtime/%.o: OPT := -O3 -g
$(BUILD)/obj/calib/%.o: OPT := -O3 -g
# kern_sgemm's SIMD paths: these two files only, called after a cpuid check (runtime/kernels/sgemm.c)
$(BUILD)/obj/runtime/kernels/sgemm_avx2.o: OPT := -O3 -g -mavx2 -mfma
$(BUILD)/obj/runtime/kernels/depthwise_avx2.o: OPT := -O3 -g -mavx2
$(BUILD)/obj/runtime/kernels/sgemm_avx512.o: OPT := -O3 -g -mavx512f -mfma
$(BUILD)/obj/calib/calib_avx2.o: OPT := -O2 -g -mavx2
$(BUILD)/obj/calib/calib_avx512.o: OPT := -O2 -g -mavx512f
