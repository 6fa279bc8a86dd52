// Unit tests of the NLB model, plan and apply.
