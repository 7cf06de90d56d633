# mk/lessons.mk: the lessons, read from their descriptors, lessons/NN-name/lesson.mk (KEY := value
# lines; CONTRIBUTING.md, "The lesson descriptor"). Included by the Makefile before its rules; no
# shell runs here. For lesson N (no leading zero), L<N>_<key> holds each key's value (empty when
# the descriptor leaves it out); LESSON_NUMS lists the lessons in order.
LESSON_KEYS := source arch runner dtypes head_dims causal teaches emulator emu_cases emu_driver emu_builds \
  emu_starter racecheck steps speed_todos emu_step_variant ptxas spill_budget registers register_kernel check_builds check_builds_full \
  header_check emu_main emu_prep emu_kernel emu_flags emu_link emu_env emu_late emu_variants emu_full emu_grader emu_cases_full emu_late_cases hostsim unit_test \
  sanitize_cases starter_spills library transport check_flags
LESSON_FILES := $(sort $(wildcard lessons/[0-9][0-9]-*/lesson.mk))
# lessons/09-hopper-wgmma/lesson.mk (or any path in that folder) -> 9
lesson_num_of_path = $(patsubst 0%,%,$(firstword $(subst -, ,$(notdir $(patsubst %/,%,$(dir $(1)))))))
define read_lesson
$(foreach k,$(LESSON_KEYS),$(k) :=
)
include $(1)
$(foreach k,$(LESSON_KEYS),L$(2)_$(k) := $$(strip $$($(k)))
)
endef
$(foreach f,$(LESSON_FILES),$(eval $(call read_lesson,$(f),$(call lesson_num_of_path,$(f)))))
$(foreach k,$(LESSON_KEYS),$(eval $(k) :=))
LESSON_NUMS := $(foreach f,$(LESSON_FILES),$(call lesson_num_of_path,$(f)))
# the lessons whose descriptor has KEY := VALUE: $(call lessons_with,KEY,VALUE...)
lessons_with = $(foreach n,$(LESSON_NUMS),$(if $(filter $(2),$(L$(n)_$(1))),$(n)))
# the descriptors and this file are sources: never remade (the pattern rule lesson% would match
# lesson.mk and lessons.mk)
mk/lessons.mk $(LESSON_FILES): ;
